/* energy.h: per-process energy for the metrics.  Sources, tried in this order by AUTO:
 *
 *   ina2xx          an INA260 (or INA219/226/...) power monitor through the Linux hwmon ina2xx
 *                   driver: /sys/class/hwmon/hwmonN/name "ina260" (or "ina2xx", "ina226"...),
 *                   power1_input in microwatts, else curr1_input (mA) x in1_input (mV).  Energy
 *                   is the trapezoidal integral of the power read at energy_start, at every
 *                   energy_sample and at energy_stop: sample about once per token.
 *   rapl            Intel RAPL through powercap: the package zones
 *                   /sys/class/powercap/intel-rapl:N/energy_uj (microjoules), wrapping at
 *                   max_energy_range_uj; energy_sample must come at least once per wrap
 *                   (minutes at full power).  Often readable by root only.
 *   model-cpu-time  E = idle_w * wall_s + (active_w - idle_w) * busy_s, where busy_s is this
 *                   process's CPU seconds (all threads) divided by cpu_scale.  idle_w is the
 *                   board's power with nothing running, active_w its power with this process
 *                   busy on one core; defaults 3.8 W and 5.0 W for a Raspberry Pi 4.  cpu_scale
 *                   converts host CPU seconds into device CPU seconds when the device is
 *                   emulated by a CPU quota (scripts/emulate-device pi4: 0.35).
 *
 * ina2xx and rapl measure the whole board or CPU package, not one process: ranks that share a
 * board or package each report all of it.  On an emulated testbed (several ranks on one host)
 * use the model; energy_config_from_env chooses it when scripts/emulate-device ran the rank.
 *
 * MPI-free; no heap allocation (energy_init's directory scans aside); one meter per thread. */
#ifndef HEADSPLIT_ENERGY_H
#define HEADSPLIT_ENERGY_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    ENERGY_SOURCE_AUTO = 0, /* ina2xx, then rapl, then model */
    ENERGY_SOURCE_INA2XX,
    ENERGY_SOURCE_RAPL,
    ENERGY_SOURCE_MODEL
} EnergySource;

#define ENERGY_DEFAULT_IDLE_W 3.8
#define ENERGY_DEFAULT_ACTIVE_W 5.0
#define ENERGY_MAX_ZONES 8
#define ENERGY_PATH_MAX 512

typedef struct {
    EnergySource source;        /* AUTO or a source to insist on */
    const char *sysfs_root;     /* prefix of /sys (NULL or "": the real one; tests: a tmp tree) */
    double idle_w;              /* model: watts with nothing running */
    double active_w;            /* model: watts with this process busy on one core */
    double cpu_scale;           /* model: host CPU seconds per device CPU second (1: native) */
    double (*clock_wall)(void); /* wall seconds (NULL: time_now); tests inject their own */
    double (*clock_cpu)(void);  /* this process's CPU seconds (NULL: time_cpu) */
} EnergyConfig;

typedef struct {
    EnergySource source; /* the one in use, never AUTO after energy_init */
    double idle_w, active_w, cpu_scale;
    double (*clock_wall)(void);
    double (*clock_cpu)(void);
    /* ina2xx: power1_input, or curr1_input and in1_input; the chip's hwmon name. */
    char power_path[ENERGY_PATH_MAX];
    char curr_path[ENERGY_PATH_MAX];
    char volt_path[ENERGY_PATH_MAX];
    char device[32];
    /* rapl: package zones' energy_uj, their wrap range and last reading. */
    int n_zones;
    char zone_path[ENERGY_MAX_ZONES][ENERGY_PATH_MAX];
    uint64_t zone_range[ENERGY_MAX_ZONES];
    uint64_t zone_last[ENERGY_MAX_ZONES];
    /* Why AUTO passed over a source ("" when none was skipped). */
    char note[256];
    /* Measurement: set by energy_start, energy_sample and energy_stop. */
    int running;
    double t0, c0;          /* wall and CPU seconds at energy_start */
    double t_last, w_last;  /* ina2xx: time and watts of the last reading */
    double joules;          /* energy so far (final after energy_stop) */
    double wall_s, cpu_s;   /* wall and CPU seconds from start to the last sample or stop */
    double peak_w;          /* ina2xx: highest reading; others: 0 */
    long samples;           /* readings taken (start and stop included) */
} EnergyMeter;

/* Fills cfg with AUTO, the real /sys, 3.8 W idle, 5.0 W active, cpu_scale 1, default clocks. */
void energy_config_default(EnergyConfig *cfg);
/* Applies the environment to cfg: HEADSPLIT_ENERGY_SOURCE (auto|ina2xx|rapl|model),
 * HEADSPLIT_ENERGY_IDLE_W and HEADSPLIT_ENERGY_ACTIVE_W, else the emulated device's
 * HEADSPLIT_DEVICE_IDLE_W/ACTIVE_W; HEADSPLIT_DEVICE_CPU (a share, not "max") sets cpu_scale,
 * and a rank run by scripts/emulate-device (HEADSPLIT_DEVICE_PROFILE set) uses the model unless
 * HEADSPLIT_ENERGY_SOURCE says otherwise.  -1 with err naming the variable on a bad value. */
int energy_config_from_env(EnergyConfig *cfg, char *err, size_t errlen);
/* Parses "auto", "ina2xx" (or "ina260", "hwmon"), "rapl", "model" (or "model-cpu-time"). */
int energy_source_parse(const char *s, EnergySource *out);

/* Chooses the source (cfg->source, or the first present for AUTO) and fills m; cfg may be
 * NULL for the defaults.  -1 with err when the chosen source is absent or cfg is invalid
 * (negative watts, active below idle, cpu_scale <= 0). */
int energy_init(EnergyMeter *m, const EnergyConfig *cfg, char *err, size_t errlen);
/* Starts a measurement (first reading); restarts a running one.  -1 with err on a read error. */
int energy_start(EnergyMeter *m, char *err, size_t errlen);
/* Takes an intermediate reading (ina2xx: integrates; rapl: follows wraps; model: updates the
 * times only) and updates joules, wall_s and cpu_s.  -1 with err on a read error or when not
 * started. */
int energy_sample(EnergyMeter *m, char *err, size_t errlen);
/* Ends the measurement and returns its joules (>= 0), also left in m->joules; -1 with err on a
 * read error or when not started. */
double energy_stop(EnergyMeter *m, char *err, size_t errlen);

/* "ina2xx", "rapl" or "model-cpu-time" (the metrics' energy_source). */
const char *energy_source_name(const EnergyMeter *m);
/* The same for a source kind ("auto" for AUTO). */
const char *energy_source_str(EnergySource s);
/* One line on the source and its parameters, e.g. "model-cpu-time (idle 3.80 W, active
 * 5.00 W, cpu scale 0.35)" or "ina2xx (ina260, /sys/class/hwmon/hwmon2/power1_input)". */
void energy_describe(const EnergyMeter *m, char *buf, size_t len);

/* Joules per token (0 when tokens <= 0). */
double energy_per_token(double joules, long tokens);
/* Energy-delay product in joule-seconds: joules * seconds.  For the per-token figure pass the
 * joules and seconds per token. */
double energy_delay_product(double joules, double seconds);
/* Mean watts over the measurement (0 before any time has passed). */
double energy_mean_watts(const EnergyMeter *m);

#endif
