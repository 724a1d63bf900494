/* energy.c: energy from an INA2xx hwmon power monitor, Intel RAPL (powercap) or a CPU-time
 * model; see energy.h for the sources and their caveats. */
#include "energy.h"

#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- small sysfs readers ---- */

/* Reads the first line of path into buf (newline removed); -1 with errno on failure. */
static int read_line(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    if (!fgets(buf, (int)len, f)) {
        int e = ferror(f) ? errno : EINVAL;
        fclose(f);
        errno = e ? e : EINVAL;
        return -1;
    }
    fclose(f);
    buf[strcspn(buf, "\r\n")] = '\0';
    return 0;
}

/* Reads a signed decimal integer file; -1 with errno (EINVAL when it is not a number). */
static int read_i64(const char *path, long long *out)
{
    char buf[64];
    if (read_line(path, buf, sizeof buf) != 0)
        return -1;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (errno || end == buf || (*end != '\0' && *end != ' ')) {
        errno = EINVAL;
        return -1;
    }
    *out = v;
    return 0;
}

static int read_u64(const char *path, uint64_t *out)
{
    long long v;
    if (read_i64(path, &v) != 0)
        return -1;
    if (v < 0) {
        errno = EINVAL;
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

/* out = a + b (+ c); -1 when it does not fit. */
static int path_cat(char *out, size_t len, const char *a, const char *b, const char *c)
{
    int n = snprintf(out, len, "%s%s%s", a, b, c ? c : "");
    return (n < 0 || (size_t)n >= len) ? -1 : 0;
}

/* "hwmon12" -> 12, "intel-rapl:3" -> 3 with prefix given; -1 when the rest is not digits. */
static long name_index(const char *name, const char *prefix)
{
    size_t pl = strlen(prefix);
    if (strncmp(name, prefix, pl) != 0 || name[pl] == '\0')
        return -1;
    long v = 0;
    for (const char *p = name + pl; *p; p++) {
        if (*p < '0' || *p > '9' || v > 100000000L)
            return -1;
        v = v * 10 + (*p - '0');
    }
    return v;
}

/* ---- configuration ---- */

void energy_config_default(EnergyConfig *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->source = ENERGY_SOURCE_AUTO;
    cfg->sysfs_root = NULL;
    cfg->idle_w = ENERGY_DEFAULT_IDLE_W;
    cfg->active_w = ENERGY_DEFAULT_ACTIVE_W;
    cfg->cpu_scale = 1.0;
}

int energy_source_parse(const char *s, EnergySource *out)
{
    if (!s)
        return -1;
    if (strcmp(s, "auto") == 0)
        *out = ENERGY_SOURCE_AUTO;
    else if (strcmp(s, "ina2xx") == 0 || strcmp(s, "ina260") == 0 || strcmp(s, "hwmon") == 0)
        *out = ENERGY_SOURCE_INA2XX;
    else if (strcmp(s, "rapl") == 0)
        *out = ENERGY_SOURCE_RAPL;
    else if (strcmp(s, "model") == 0 || strcmp(s, "model-cpu-time") == 0)
        *out = ENERGY_SOURCE_MODEL;
    else
        return -1;
    return 0;
}

/* Parses a non-negative finite number from variable name's value s. */
static int env_number(const char *name, const char *s, double *out, char *err, size_t errlen)
{
    char *end = NULL;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || !isfinite(v) || v < 0)
        return util_err(err, errlen, "%s='%s' is not a non-negative number", name, s);
    *out = v;
    return 0;
}

static const char *env_nonempty(const char *name)
{
    const char *v = getenv(name);
    return (v && *v) ? v : NULL;
}

int energy_config_from_env(EnergyConfig *cfg, char *err, size_t errlen)
{
    const char *v;
    int explicit_source = 0;
    if ((v = env_nonempty("HEADSPLIT_ENERGY_SOURCE"))) {
        if (energy_source_parse(v, &cfg->source) != 0)
            return util_err(err, errlen,
                            "HEADSPLIT_ENERGY_SOURCE='%s' must be auto, ina2xx, rapl or model", v);
        explicit_source = 1;
    }
    static const char *const idle_vars[] = {"HEADSPLIT_ENERGY_IDLE_W", "HEADSPLIT_DEVICE_IDLE_W"};
    static const char *const active_vars[] = {"HEADSPLIT_ENERGY_ACTIVE_W",
                                              "HEADSPLIT_DEVICE_ACTIVE_W"};
    for (int i = 0; i < 2; i++) {
        if ((v = env_nonempty(idle_vars[i]))) {
            if (env_number(idle_vars[i], v, &cfg->idle_w, err, errlen) != 0)
                return -1;
            break;
        }
    }
    for (int i = 0; i < 2; i++) {
        if ((v = env_nonempty(active_vars[i]))) {
            if (env_number(active_vars[i], v, &cfg->active_w, err, errlen) != 0)
                return -1;
            break;
        }
    }
    if ((v = env_nonempty("HEADSPLIT_DEVICE_CPU")) && strcmp(v, "max") != 0) {
        double share = 0;
        if (env_number("HEADSPLIT_DEVICE_CPU", v, &share, err, errlen) != 0)
            return -1;
        if (share <= 0)
            return util_err(err, errlen, "HEADSPLIT_DEVICE_CPU='%s' must be above 0", v);
        cfg->cpu_scale = share;
    }
    if (!explicit_source && env_nonempty("HEADSPLIT_DEVICE_PROFILE"))
        cfg->source = ENERGY_SOURCE_MODEL;
    return 0;
}

/* ---- source discovery ---- */

static int is_ina_name(const char *name) { return strncmp(name, "ina2", 4) == 0; }

/* Finds the INA2xx hwmon device with the lowest index; 1 when found, 0 when not. */
static int probe_ina2xx(EnergyMeter *m, const char *root, char *why, size_t whylen)
{
    char dir[ENERGY_PATH_MAX];
    if (path_cat(dir, sizeof dir, root, "/sys/class/hwmon", NULL) != 0)
        return 0;
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(why, whylen, "ina2xx: %s: %s", dir, strerror(errno));
        return 0;
    }
    long best = -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        long idx = name_index(e->d_name, "hwmon");
        if (idx < 0 || (best >= 0 && idx >= best))
            continue;
        char base[ENERGY_PATH_MAX], p[ENERGY_PATH_MAX], name[64];
        if (path_cat(base, sizeof base, dir, "/", e->d_name) != 0 ||
            path_cat(p, sizeof p, base, "/name", NULL) != 0 ||
            read_line(p, name, sizeof name) != 0 || !is_ina_name(name))
            continue;
        /* Attributes live in hwmonN/ (current drivers) or hwmonN/device/ (older ones). */
        static const char *const subdirs[] = {"", "/device"};
        for (int s = 0; s < 2; s++) {
            char pw[ENERGY_PATH_MAX], cu[ENERGY_PATH_MAX], vo[ENERGY_PATH_MAX];
            long long v;
            if (path_cat(pw, sizeof pw, base, subdirs[s], "/power1_input") != 0 ||
                path_cat(cu, sizeof cu, base, subdirs[s], "/curr1_input") != 0 ||
                path_cat(vo, sizeof vo, base, subdirs[s], "/in1_input") != 0)
                continue;
            if (read_i64(pw, &v) == 0) {
                snprintf(m->power_path, sizeof m->power_path, "%s", pw);
                m->curr_path[0] = m->volt_path[0] = '\0';
            } else if (read_i64(cu, &v) == 0 && read_i64(vo, &v) == 0) {
                m->power_path[0] = '\0';
                snprintf(m->curr_path, sizeof m->curr_path, "%s", cu);
                snprintf(m->volt_path, sizeof m->volt_path, "%s", vo);
            } else {
                continue;
            }
            snprintf(m->device, sizeof m->device, "%.31s", name);
            best = idx;
            break;
        }
    }
    closedir(d);
    if (best < 0 && why[0] == '\0')
        snprintf(why, whylen, "ina2xx: no readable ina2xx device under %s", dir);
    return best >= 0;
}

/* Finds the RAPL package zones (intel-rapl:N named package-*; all top-level zones when none is
 * so named); 1 when at least one is readable. */
static int probe_rapl(EnergyMeter *m, const char *root, char *why, size_t whylen)
{
    char dir[ENERGY_PATH_MAX];
    if (path_cat(dir, sizeof dir, root, "/sys/class/powercap", NULL) != 0)
        return 0;
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(why, whylen, "rapl: %s: %s", dir, strerror(errno));
        return 0;
    }
    long idx[ENERGY_MAX_ZONES];
    int is_pkg[ENERGY_MAX_ZONES];
    int n = 0, n_pkg = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < ENERGY_MAX_ZONES) {
        long i = name_index(e->d_name, "intel-rapl:");
        if (i < 0)
            continue;
        char base[ENERGY_PATH_MAX], p[ENERGY_PATH_MAX], r[ENERGY_PATH_MAX], np[ENERGY_PATH_MAX];
        char name[64];
        uint64_t v, range;
        if (path_cat(base, sizeof base, dir, "/", e->d_name) != 0 ||
            path_cat(p, sizeof p, base, "/energy_uj", NULL) != 0 ||
            path_cat(r, sizeof r, base, "/max_energy_range_uj", NULL) != 0 ||
            path_cat(np, sizeof np, base, "/name", NULL) != 0)
            continue;
        if (read_u64(p, &v) != 0) {
            if (errno == EACCES || errno == EPERM)
                snprintf(why, whylen, "rapl: %s is not readable (root only on Linux >= 5.10)", p);
            continue;
        }
        if (read_u64(r, &range) != 0 || range == 0)
            continue;
        int pkg = read_line(np, name, sizeof name) == 0 && strncmp(name, "package", 7) == 0;
        /* Insert sorted by index so that zone order does not depend on readdir. */
        int at = n;
        while (at > 0 && idx[at - 1] > i) {
            idx[at] = idx[at - 1];
            is_pkg[at] = is_pkg[at - 1];
            memcpy(m->zone_path[at], m->zone_path[at - 1], sizeof m->zone_path[at]);
            m->zone_range[at] = m->zone_range[at - 1];
            at--;
        }
        idx[at] = i;
        is_pkg[at] = pkg;
        snprintf(m->zone_path[at], sizeof m->zone_path[at], "%s", p);
        m->zone_range[at] = range;
        n++;
        n_pkg += pkg;
    }
    closedir(d);
    if (n_pkg > 0 && n_pkg < n) { /* keep the packages only (psys and others overlap them) */
        int k = 0;
        for (int j = 0; j < n; j++) {
            if (!is_pkg[j])
                continue;
            if (k != j) {
                memcpy(m->zone_path[k], m->zone_path[j], sizeof m->zone_path[k]);
                m->zone_range[k] = m->zone_range[j];
            }
            k++;
        }
        n = k;
    }
    m->n_zones = n;
    if (n == 0 && why[0] == '\0')
        snprintf(why, whylen, "rapl: no readable intel-rapl zone under %s", dir);
    return n > 0;
}

int energy_init(EnergyMeter *m, const EnergyConfig *cfg, char *err, size_t errlen)
{
    EnergyConfig def;
    if (!cfg) {
        energy_config_default(&def);
        cfg = &def;
    }
    memset(m, 0, sizeof *m);
    if (!isfinite(cfg->idle_w) || !isfinite(cfg->active_w) || cfg->idle_w < 0 ||
        cfg->active_w < cfg->idle_w)
        return util_err(err, errlen,
                        "energy model: idle %.3g W and active %.3g W must satisfy "
                        "0 <= idle <= active",
                        cfg->idle_w, cfg->active_w);
    if (!isfinite(cfg->cpu_scale) || cfg->cpu_scale <= 0)
        return util_err(err, errlen, "energy model: cpu_scale %.3g must be above 0",
                        cfg->cpu_scale);
    m->idle_w = cfg->idle_w;
    m->active_w = cfg->active_w;
    m->cpu_scale = cfg->cpu_scale;
    m->clock_wall = cfg->clock_wall ? cfg->clock_wall : time_now;
    m->clock_cpu = cfg->clock_cpu ? cfg->clock_cpu : time_cpu;
    const char *root = cfg->sysfs_root ? cfg->sysfs_root : "";

    char why_ina[ENERGY_PATH_MAX + 64] = "", why_rapl[ENERGY_PATH_MAX + 64] = "";
    switch (cfg->source) {
    case ENERGY_SOURCE_INA2XX:
        if (!probe_ina2xx(m, root, why_ina, sizeof why_ina))
            return util_err(err, errlen, "energy source ina2xx unavailable: %s", why_ina);
        m->source = ENERGY_SOURCE_INA2XX;
        return 0;
    case ENERGY_SOURCE_RAPL:
        if (!probe_rapl(m, root, why_rapl, sizeof why_rapl))
            return util_err(err, errlen, "energy source rapl unavailable: %s", why_rapl);
        m->source = ENERGY_SOURCE_RAPL;
        return 0;
    case ENERGY_SOURCE_MODEL:
        m->source = ENERGY_SOURCE_MODEL;
        return 0;
    case ENERGY_SOURCE_AUTO:
        break;
    default:
        return util_err(err, errlen, "energy source %d unknown", (int)cfg->source);
    }
    if (probe_ina2xx(m, root, why_ina, sizeof why_ina)) {
        m->source = ENERGY_SOURCE_INA2XX;
        return 0;
    }
    if (probe_rapl(m, root, why_rapl, sizeof why_rapl)) {
        m->source = ENERGY_SOURCE_RAPL;
        return 0;
    }
    m->source = ENERGY_SOURCE_MODEL;
    snprintf(m->note, sizeof m->note, "%.120s; %.120s", why_ina, why_rapl);
    return 0;
}

/* ---- measurement ---- */

static int read_watts(const EnergyMeter *m, double *w, char *err, size_t errlen)
{
    long long a, b;
    if (m->power_path[0]) {
        if (read_i64(m->power_path, &a) != 0)
            return util_err(err, errlen, "energy: cannot read %s: %s", m->power_path,
                            strerror(errno));
        *w = (double)a * 1e-6; /* microwatts */
        return 0;
    }
    if (read_i64(m->curr_path, &a) != 0)
        return util_err(err, errlen, "energy: cannot read %s: %s", m->curr_path, strerror(errno));
    if (read_i64(m->volt_path, &b) != 0)
        return util_err(err, errlen, "energy: cannot read %s: %s", m->volt_path, strerror(errno));
    *w = fabs((double)a * (double)b) * 1e-6; /* mA x mV = microwatts */
    return 0;
}

static int read_zone(const EnergyMeter *m, int z, uint64_t *v, char *err, size_t errlen)
{
    if (read_u64(m->zone_path[z], v) != 0)
        return util_err(err, errlen, "energy: cannot read %s: %s", m->zone_path[z],
                        strerror(errno));
    return 0;
}

static double model_joules(const EnergyMeter *m, double wall, double cpu)
{
    double busy = cpu / m->cpu_scale;
    return m->idle_w * wall + (m->active_w - m->idle_w) * busy;
}

int energy_start(EnergyMeter *m, char *err, size_t errlen)
{
    m->running = 0;
    m->joules = m->wall_s = m->cpu_s = m->peak_w = 0;
    m->samples = 0;
    if (m->source == ENERGY_SOURCE_INA2XX) {
        double w;
        if (read_watts(m, &w, err, errlen) != 0)
            return -1;
        m->w_last = m->peak_w = w;
    } else if (m->source == ENERGY_SOURCE_RAPL) {
        for (int z = 0; z < m->n_zones; z++)
            if (read_zone(m, z, &m->zone_last[z], err, errlen) != 0)
                return -1;
    }
    m->t0 = m->t_last = m->clock_wall();
    m->c0 = m->clock_cpu();
    m->samples = 1;
    m->running = 1;
    return 0;
}

int energy_sample(EnergyMeter *m, char *err, size_t errlen)
{
    if (!m->running)
        return util_err(err, errlen, "energy: sample without energy_start");
    double t = m->clock_wall(), c = m->clock_cpu();
    if (m->source == ENERGY_SOURCE_INA2XX) {
        double w;
        if (read_watts(m, &w, err, errlen) != 0)
            return -1;
        m->joules += 0.5 * (w + m->w_last) * (t - m->t_last);
        m->w_last = w;
        m->t_last = t;
        if (w > m->peak_w)
            m->peak_w = w;
    } else if (m->source == ENERGY_SOURCE_RAPL) {
        for (int z = 0; z < m->n_zones; z++) {
            uint64_t now = 0, last = m->zone_last[z], range = m->zone_range[z];
            if (read_zone(m, z, &now, err, errlen) != 0)
                return -1;
            /* The counter runs from 0 to max_energy_range_uj and then starts again. */
            uint64_t delta = now >= last ? now - last : (range >= last ? range - last : 0) + now;
            m->joules += (double)delta * 1e-6;
            m->zone_last[z] = now;
        }
    } else {
        m->joules = model_joules(m, t - m->t0, c - m->c0);
    }
    m->wall_s = t - m->t0;
    m->cpu_s = c - m->c0;
    m->samples++;
    return 0;
}

double energy_stop(EnergyMeter *m, char *err, size_t errlen)
{
    if (energy_sample(m, err, errlen) != 0)
        return -1.0;
    m->running = 0;
    return m->joules;
}

/* ---- naming and derived figures ---- */

const char *energy_source_str(EnergySource s)
{
    switch (s) {
    case ENERGY_SOURCE_AUTO:
        return "auto";
    case ENERGY_SOURCE_INA2XX:
        return "ina2xx";
    case ENERGY_SOURCE_RAPL:
        return "rapl";
    case ENERGY_SOURCE_MODEL:
        return "model-cpu-time";
    }
    return "unknown";
}

const char *energy_source_name(const EnergyMeter *m) { return energy_source_str(m->source); }

void energy_describe(const EnergyMeter *m, char *buf, size_t len)
{
    if (!buf || len == 0)
        return;
    switch (m->source) {
    case ENERGY_SOURCE_INA2XX:
        snprintf(buf, len, "ina2xx (%s, %s)", m->device,
                 m->power_path[0] ? m->power_path : m->curr_path);
        break;
    case ENERGY_SOURCE_RAPL:
        snprintf(buf, len, "rapl (%d zone%s, %s%s)", m->n_zones, m->n_zones == 1 ? "" : "s",
                 m->zone_path[0], m->n_zones > 1 ? ", ..." : "");
        break;
    default:
        snprintf(buf, len, "model-cpu-time (idle %.2f W, active %.2f W, cpu scale %.2f)",
                 m->idle_w, m->active_w, m->cpu_scale);
        break;
    }
}

double energy_per_token(double joules, long tokens)
{
    return tokens > 0 ? joules / (double)tokens : 0.0;
}

double energy_delay_product(double joules, double seconds) { return joules * seconds; }

double energy_mean_watts(const EnergyMeter *m)
{
    return m->wall_s > 0 ? m->joules / m->wall_s : 0.0;
}
