/* config_io.h: the model configuration's HDF5 form (/config attributes of a model file).
 * The file layout is documented in docs/model-format.md.  Kept apart from config.h so that
 * the planner and the simulator, which read configurations but no files, need no HDF5. */
#ifndef HEADSPLIT_CONFIG_IO_H
#define HEADSPLIT_CONFIG_IO_H

#include "config.h"

#include <hdf5.h>
#include <stddef.h>

/* Format version of a file whose matrices are all float32; a file holding any quantized
 * matrix has version 2 (docs/model-format.md).  Readers accept both, refuse others. */
#define HEADSPLIT_FORMAT_VERSION 1
#define HEADSPLIT_FORMAT_VERSION_QUANT 2

/* Reads /config attributes from an open model file; validates. fname is for messages. */
int config_read(ModelConfig *c, hid_t file, const char *fname, char *err, size_t errlen);
/* Writes /config attributes (format version included). */
int config_write(const ModelConfig *c, hid_t file, char *err, size_t errlen);
/* Reads the stored type of every matrix kind into c->wtype (the widest over layers); for
 * tools that build a ModelConfig by hand and then open a file.  -1 with err. */
int config_read_wtypes(ModelConfig *c, hid_t file, const char *fname, char *err,
                       size_t errlen);

#endif
