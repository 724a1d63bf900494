/* config_io.h: the model configuration's HDF5 form (/config attributes of a model file).
 * The file layout is documented in docs/model-format.md.  Kept apart from config.h so that
 * the planner and the simulator, which read configurations but no files, need no HDF5. */
#ifndef HEADSPLIT_CONFIG_IO_H
#define HEADSPLIT_CONFIG_IO_H

#include "config.h"

#include <hdf5.h>
#include <stddef.h>

/* Format version written into every model file; files of another version are refused. */
#define HEADSPLIT_FORMAT_VERSION 1

/* Reads /config attributes from an open model file; validates. fname is for messages. */
int config_read(ModelConfig *c, hid_t file, const char *fname, char *err, size_t errlen);
/* Writes /config attributes (format version included). */
int config_write(const ModelConfig *c, hid_t file, char *err, size_t errlen);

#endif
