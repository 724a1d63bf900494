/* fuzz_common.h: helpers shared by the libFuzzer targets in fuzz/ (built by scripts/fuzz.sh).
 * Each target defines LLVMFuzzerTestOneInput; inputs that the code under test refuses are
 * fine, anything else (a crash, a sanitizer report, a broken invariant) aborts. */
#ifndef HEADSPLIT_FUZZ_COMMON_H
#define HEADSPLIT_FUZZ_COMMON_H

#include <dirent.h>
#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Aborts with a message when an invariant of the code under test does not hold. */
#define FUZZ_ASSERT(cond, ...)                                                                 \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "FUZZ INVARIANT FAILED at %s:%d: %s: ", __FILE__, __LINE__, #cond);\
            fprintf(stderr, __VA_ARGS__);                                                      \
            fputc('\n', stderr);                                                               \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

static char fuzz_scratch[256];

/* Removes the scratch directory and its files at exit (a crash leaves it for inspection). */
static inline void fuzz_scratch_remove(void)
{
    DIR *d = opendir(fuzz_scratch);
    if (!d)
        return;
    struct dirent *e;
    char path[600];
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", fuzz_scratch, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(fuzz_scratch);
}

/* A private scratch directory for this fuzzing process (tmpfs when available). */
static inline const char *fuzz_scratch_dir(void)
{
    if (!fuzz_scratch[0]) {
        const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
        snprintf(fuzz_scratch, sizeof fuzz_scratch, "%s/hsfuzz.XXXXXX", base ? base : "/tmp");
        if (!mkdtemp(fuzz_scratch)) {
            perror("mkdtemp");
            abort();
        }
        atexit(fuzz_scratch_remove);
    }
    return fuzz_scratch;
}

/* "<scratch>/<name>" in a static buffer of its own per slot (0..3). */
static inline const char *fuzz_path(int slot, const char *name)
{
    static char buf[4][512];
    snprintf(buf[slot & 3], sizeof buf[0], "%s/%s", fuzz_scratch_dir(), name);
    return buf[slot & 3];
}

/* Writes n bytes to path (truncating); aborts on I/O errors, which are not findings. */
static inline void fuzz_write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0) {
        perror(path);
        abort();
    }
}

/* Sequential reader of the fuzz input for structure-aware targets: runs out into zeros. */
typedef struct {
    const uint8_t *p;
    size_t n;
} FuzzIn;

static inline uint8_t fuzz_u8(FuzzIn *in)
{
    if (in->n == 0)
        return 0;
    in->n--;
    return *in->p++;
}

static inline uint32_t fuzz_u32(FuzzIn *in)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)fuzz_u8(in) << (8 * i);
    return v;
}

static inline uint64_t fuzz_u64(FuzzIn *in)
{
    uint64_t lo = fuzz_u32(in);
    return lo | (uint64_t)fuzz_u32(in) << 32;
}

/* A small int most of the time (so that fields are often valid), a raw one otherwise. */
static inline int32_t fuzz_int(FuzzIn *in)
{
    uint8_t mode = fuzz_u8(in);
    if (mode < 192)
        return (int32_t)(fuzz_u8(in) | (uint32_t)(mode & 0x3f) << 8) - (mode & 0x80 ? 8 : 0);
    uint32_t u = fuzz_u32(in);
    int32_t v;
    memcpy(&v, &u, sizeof v);
    return v;
}

static inline double fuzz_double(FuzzIn *in)
{
    uint64_t u = fuzz_u64(in);
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* An in-memory HDF5 file (core driver, no backing store) for structure-aware targets. */
static inline hid_t fuzz_h5_memfile(const char *name)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0 || H5Pset_fapl_core(fapl, 1 << 16, 0) < 0)
        abort();
    hid_t f = H5Fcreate(name, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (f < 0)
        abort();
    return f;
}

/* One in-memory file reused by many inputs (creating a file costs ~10 ms under ASan, mostly
 * HDF5's large cache allocations); the caller removes what it created with fuzz_h5_unlink.
 * Recreated every 256 uses so that freed space does not pile up. */
static inline hid_t fuzz_h5_shared_file(void)
{
    static hid_t f = -1;
    static int uses;
    if (f >= 0 && ++uses > 256) {
        H5Fclose(f);
        f = -1;
    }
    if (f < 0) {
        f = fuzz_h5_memfile("shared.h5");
        uses = 0;
    }
    return f;
}

/* Removes the link path from f if it exists. */
static inline void fuzz_h5_unlink(hid_t f, const char *path)
{
    if (H5Lexists(f, path, H5P_DEFAULT) > 0 && H5Ldelete(f, path, H5P_DEFAULT) < 0)
        abort();
}

#endif
