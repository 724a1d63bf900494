/* Energy: the CPU-time model, an INA2xx hwmon device (power1_input and curr x in) and Intel
 * RAPL (package zones, counter wrap) on fake sysfs trees in /tmp with injected clocks; source
 * order, forced sources, configuration from the environment, and the derived figures. */
#define _XOPEN_SOURCE 700
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "energy.h"
#include "util.h"

#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_helpers.h"

static char root[64];
static char err[512];

/* Injected clocks. */
static double fake_wall, fake_cpu;
static double clock_wall_fake(void) { return fake_wall; }
static double clock_cpu_fake(void) { return fake_cpu; }

static int setup_root(void **state)
{
    (void)state;
    fake_wall = 100.0;
    fake_cpu = 10.0;
    err[0] = '\0';
    return test_tmpdir_make(root, sizeof root, "energy");
}

static int teardown_root(void **state)
{
    (void)state;
    return test_tmpdir_remove(root);
}

/* mkdir -p root/rel */
static void mkdirs(const char *rel)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    for (char *s = p + strlen(root) + 1; *s; s++) {
        if (*s == '/') {
            *s = '\0';
            mkdir(p, 0755);
            *s = '/';
        }
    }
    mkdir(p, 0755);
}

/* Writes text to root/rel (its directory must exist). */
static void put(const char *rel, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static EnergyConfig fake_config(EnergySource source)
{
    EnergyConfig c;
    energy_config_default(&c);
    c.source = source;
    c.sysfs_root = root;
    c.clock_wall = clock_wall_fake;
    c.clock_cpu = clock_cpu_fake;
    return c;
}

static void make_ina(const char *hwmon, const char *name, const char *uw)
{
    char rel[256];
    snprintf(rel, sizeof rel, "sys/class/hwmon/%s", hwmon);
    mkdirs(rel);
    snprintf(rel, sizeof rel, "sys/class/hwmon/%s/name", hwmon);
    char line[64];
    snprintf(line, sizeof line, "%s\n", name);
    put(rel, line);
    if (uw) {
        snprintf(rel, sizeof rel, "sys/class/hwmon/%s/power1_input", hwmon);
        snprintf(line, sizeof line, "%s\n", uw);
        put(rel, line);
    }
}

static void make_rapl_zone(const char *zone, const char *name, const char *uj, const char *range)
{
    char rel[256], line[64];
    snprintf(rel, sizeof rel, "sys/class/powercap/%s", zone);
    mkdirs(rel);
    snprintf(rel, sizeof rel, "sys/class/powercap/%s/name", zone);
    snprintf(line, sizeof line, "%s\n", name);
    put(rel, line);
    snprintf(rel, sizeof rel, "sys/class/powercap/%s/energy_uj", zone);
    snprintf(line, sizeof line, "%s\n", uj);
    put(rel, line);
    snprintf(rel, sizeof rel, "sys/class/powercap/%s/max_energy_range_uj", zone);
    snprintf(line, sizeof line, "%s\n", range);
    put(rel, line);
}

/* ---- model ---- */

static void test_model_formula(void **state)
{
    (void)state;
    EnergyConfig c = fake_config(ENERGY_SOURCE_MODEL);
    EnergyMeter m;
    assert_int_equal(energy_init(&m, &c, err, sizeof err), 0);
    assert_string_equal(energy_source_name(&m), "model-cpu-time");
    assert_int_equal(energy_start(&m, err, sizeof err), 0);
    fake_wall += 4.0;
    fake_cpu += 1.0;
    assert_int_equal(energy_sample(&m, err, sizeof err), 0);
    assert_near(m.joules, 3.8 * 4 + 1.2 * 1, 1e-9);
    fake_wall += 6.0;
    fake_cpu += 3.0;
    /* 10 s wall, 4 s busy: 3.8 * 10 + (5.0 - 3.8) * 4 */
    assert_near(energy_stop(&m, err, sizeof err), 42.8, 1e-9);
    assert_near(m.wall_s, 10.0, 1e-12);
    assert_near(m.cpu_s, 4.0, 1e-12);
    assert_near(energy_mean_watts(&m), 4.28, 1e-9);
    assert_int_equal(m.samples, 3);

    /* An emulated device at 0.5 of a host core: 4 host CPU s are 8 device s. */
    c.cpu_scale = 0.5;
    c.idle_w = 2.0;
    c.active_w = 3.0;
    assert_int_equal(energy_init(&m, &c, err, sizeof err), 0);
    assert_int_equal(energy_start(&m, err, sizeof err), 0);
    fake_wall += 10.0;
    fake_cpu += 4.0;
    assert_near(energy_stop(&m, err, sizeof err), 2.0 * 10 + 1.0 * 8, 1e-9);
}

static void test_model_real_clocks(void **state)
{
    (void)state;
    EnergyConfig c;
    energy_config_default(&c);
    c.source = ENERGY_SOURCE_MODEL;
    EnergyMeter m;
    assert_int_equal(energy_init(&m, &c, err, sizeof err), 0);
    assert_int_equal(energy_start(&m, err, sizeof err), 0);
    volatile double x = 0;
    double t0 = time_now();
    while (time_now() - t0 < 0.02)
        x += 1.0;
    double j = energy_stop(&m, err, sizeof err);
    assert_true(m.wall_s >= 0.02);
    assert_true(m.cpu_s > 0);
    /* The model over the clocks it read: idle power for the wall time, the rest for the CPU
     * time of every thread of the process (OpenBLAS's own threads may spin for a while after
     * they start, so the process can use more CPU time than wall time). */
    assert_true(j >= ENERGY_DEFAULT_IDLE_W * m.wall_s - 1e-9);
    assert_near(j, ENERGY_DEFAULT_IDLE_W * m.wall_s +
                       (ENERGY_DEFAULT_ACTIVE_W - ENERGY_DEFAULT_IDLE_W) * m.cpu_s, 1e-9);
}

/* ---- ina2xx ---- */

static void test_ina_power_input(void **state)
{
    (void)state;
    make_ina("hwmon0", "coretemp", NULL);
    make_ina("hwmon10", "ina260", "9000000");
    make_ina("hwmon2", "ina260", "2000000"); /* 2 W; hwmon2 comes before hwmon10 */
    EnergyConfig c = fake_config(ENERGY_SOURCE_AUTO);
    EnergyMeter m;
    assert_int_equal(energy_init(&m, &c, err, sizeof err), 0);
    assert_string_equal(energy_source_name(&m), "ina2xx");
    assert_string_equal(m.device, "ina260");
    assert_non_null(strstr(m.power_path, "/hwmon2/power1_input"));
    assert_int_equal(energy_start(&m, err, sizeof err), 0);
    put("sys/class/hwmon/hwmon2/power1_input", "4000000\n");
    fake_wall += 1.0;
    assert_int_equal(energy_sample(&m, err, sizeof err), 0);
    assert_near(m.joules, 3.0, 1e-9); /* (2 + 4) / 2 * 1 s */
    fake_wall += 2.0;
    assert_near(energy_stop(&m, err, sizeof err), 11.0, 1e-9); /* + 4 W * 2 s */
    assert_near(m.peak_w, 4.0, 1e-12);
    char d[256];
    energy_describe(&m, d, sizeof d);
    assert_non_null(strstr(d, "ina2xx (ina260"));
}

static void test_ina_current_times_voltage(void **state)
{
    (void)state;
    /* An older driver layout: name in hwmonN, attributes in hwmonN/device. */
    make_ina("hwmon1", "ina2xx", NULL);
    mkdirs("sys/class/hwmon/hwmon1/device");
    put("sys/class/hwmon/hwmon1/device/curr1_input", "1000\n"); /* mA */
    put("sys/class/hwmon/hwmon1/device/in1_input", "5000\n");   /* mV */
    put("sys/class/hwmon/hwmon1/device/in0_input", "2\n");      /* shunt: not used */
    EnergyConfig c = fake_config(ENERGY_SOURCE_INA2XX);
    EnergyMeter m;
    assert_int_equal(energy_init(&m, &c, err, sizeof err), 0);
    assert_int_equal(m.power_path[0], '\0');
    assert_int_equal(energy_start(&m, err, sizeof err), 0);
    fake_wall += 2.0;
    assert_near(energy_stop(&m, err, sizeof err), 10.0, 1e-9); /* 5 W * 2 s */
}

static void test_ina_read_error(void **state)
{
    (void)state;
    make_ina("hwmon0", "ina226", "1000000");
    EnergyConfig c = fake_config(ENERGY_SOURCE_AUTO);
    EnergyMeter m;
    assert_int_equal(energy_init(&m, &c, err, sizeof err), 0);
    assert_int_equal(energy_start(&m, err, sizeof err), 0);
    char p[512];
    snprintf(p, sizeof p, "%s/sys/class/hwmon/hwmon0/power1_input", root);
    assert_int_equal(unlink(p), 0);
    fake_wall += 1.0;
    assert_true(energy_stop(&m, err, sizeof err) < 0);
    assert_non_null(strstr(err, "power1_input"));
}

/* ---- rapl ---- */

static void test_rapl_wrap(void **state)
{
    (void)state;
    make_rapl_zone("intel-rapl:0", "package-0", "900", "1000");
    make_rapl_zone("intel-rapl:0:0", "core", "5", "1000"); /* sub-zone: inside the package */
    make_rapl_zone("intel-rapl:1", "psys", "7", "1000");   /* platform: overlaps the package */
    EnergyConfig c = fake_config(ENERGY_SOURCE_AUTO);
    EnergyMeter m;
    assert_int_equal(energy_init(&m, &c, err, sizeof err), 0);
    assert_string_equal(energy_source_name(&m), "rapl");
    assert_int_equal(m.n_zones, 1);
    assert_int_equal(energy_start(&m, err, sizeof err), 0);
    put("sys/class/powercap/intel-rapl:0/energy_uj", "950\n"); /* +50 */
    fake_wall += 1.0;
    assert_int_equal(energy_sample(&m, err, sizeof err), 0);
    put("sys/class/powercap/intel-rapl:0/energy_uj", "100\n"); /* wrapped: +50 + 100 */
    fake_wall += 1.0;
    assert_int_equal(energy_sample(&m, err, sizeof err), 0);
    assert_near(m.joules, 200e-6, 1e-12);
    put("sys/class/powercap/intel-rapl:0/energy_uj", "800\n"); /* +700 */
    fake_wall += 1.0;
    assert_near(energy_stop(&m, err, sizeof err), 900e-6, 1e-12);
    assert_near(m.wall_s, 3.0, 1e-12);

    /* A single wrap between start and stop only. */
    put("sys/class/powercap/intel-rapl:0/energy_uj", "990\n");
    assert_int_equal(energy_start(&m, err, sizeof err), 0);
    put("sys/class/powercap/intel-rapl:0/energy_uj", "20\n");
    assert_near(energy_stop(&m, err, sizeof err), 30e-6, 1e-12);
}

static void test_rapl_two_packages(void **state)
{
    (void)state;
    make_rapl_zone("intel-rapl:1", "package-1", "2000000", "262143328850");
    make_rapl_zone("intel-rapl:0", "package-0", "1000000", "262143328850");
    EnergyConfig c = fake_config(ENERGY_SOURCE_RAPL);
    EnergyMeter m;
    assert_int_equal(energy_init(&m, &c, err, sizeof err), 0);
    assert_int_equal(m.n_zones, 2);
    assert_non_null(strstr(m.zone_path[0], "intel-rapl:0/"));
    assert_int_equal(energy_start(&m, err, sizeof err), 0);
    put("sys/class/powercap/intel-rapl:0/energy_uj", "4000000\n"); /* +3 J */
    put("sys/class/powercap/intel-rapl:1/energy_uj", "3500000\n"); /* +1.5 J */
    fake_wall += 2.0;
    assert_near(energy_stop(&m, err, sizeof err), 4.5, 1e-9);
    assert_near(energy_mean_watts(&m), 2.25, 1e-9);
}

/* ---- source choice ---- */

static void test_auto_order(void **state)
{
    (void)state;
    EnergyConfig c = fake_config(ENERGY_SOURCE_AUTO);
    EnergyMeter m;
    /* Nothing there: the model, with a note on why. */
    assert_int_equal(energy_init(&m, &c, err, sizeof err), 0);
    assert_int_equal(m.source, ENERGY_SOURCE_MODEL);
    assert_non_null(strstr(m.note, "hwmon"));
    assert_non_null(strstr(m.note, "powercap"));
    /* RAPL only. */
    make_rapl_zone("intel-rapl:0", "package-0", "1", "1000");
    assert_int_equal(energy_init(&m, &c, err, sizeof err), 0);
    assert_int_equal(m.source, ENERGY_SOURCE_RAPL);
    /* A non-INA hwmon device does not count; an INA one comes first. */
    make_ina("hwmon0", "nct6775", "5000000");
    assert_int_equal(energy_init(&m, &c, err, sizeof err), 0);
    assert_int_equal(m.source, ENERGY_SOURCE_RAPL);
    make_ina("hwmon1", "ina219", "5000000");
    assert_int_equal(energy_init(&m, &c, err, sizeof err), 0);
    assert_int_equal(m.source, ENERGY_SOURCE_INA2XX);
}

static void test_forced_source_absent(void **state)
{
    (void)state;
    EnergyConfig c = fake_config(ENERGY_SOURCE_INA2XX);
    EnergyMeter m;
    assert_int_equal(energy_init(&m, &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "ina2xx unavailable"));
    assert_non_null(strstr(err, root));
    c.source = ENERGY_SOURCE_RAPL;
    mkdirs("sys/class/powercap/intel-rapl:0"); /* a zone without counters */
    assert_int_equal(energy_init(&m, &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "rapl unavailable"));
}

static void test_bad_config(void **state)
{
    (void)state;
    EnergyConfig c = fake_config(ENERGY_SOURCE_MODEL);
    EnergyMeter m;
    c.active_w = 3.0; /* below idle 3.8 */
    assert_int_equal(energy_init(&m, &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "idle"));
    c = fake_config(ENERGY_SOURCE_MODEL);
    c.cpu_scale = 0;
    assert_int_equal(energy_init(&m, &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "cpu_scale"));
    /* Not started. */
    c = fake_config(ENERGY_SOURCE_MODEL);
    assert_int_equal(energy_init(&m, &c, err, sizeof err), 0);
    assert_int_equal(energy_sample(&m, err, sizeof err), -1);
    assert_true(energy_stop(&m, err, sizeof err) < 0);
    /* NULL config: the defaults on the real /sys, always something. */
    assert_int_equal(energy_init(&m, NULL, err, sizeof err), 0);
    assert_int_not_equal(m.source, ENERGY_SOURCE_AUTO);
}

static void test_env(void **state)
{
    (void)state;
    static const char *const vars[] = {"HEADSPLIT_ENERGY_SOURCE",   "HEADSPLIT_ENERGY_IDLE_W",
                                       "HEADSPLIT_ENERGY_ACTIVE_W", "HEADSPLIT_DEVICE_IDLE_W",
                                       "HEADSPLIT_DEVICE_ACTIVE_W", "HEADSPLIT_DEVICE_CPU",
                                       "HEADSPLIT_DEVICE_PROFILE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    EnergyConfig c;
    energy_config_default(&c);
    assert_int_equal(energy_config_from_env(&c, err, sizeof err), 0);
    assert_int_equal(c.source, ENERGY_SOURCE_AUTO);
    assert_near(c.idle_w, 3.8, 0);

    /* Under scripts/emulate-device: the model, the device's watts and CPU share. */
    setenv("HEADSPLIT_DEVICE_PROFILE", "pi4", 1);
    setenv("HEADSPLIT_DEVICE_CPU", "0.35", 1);
    setenv("HEADSPLIT_DEVICE_IDLE_W", "2.5", 1);
    setenv("HEADSPLIT_DEVICE_ACTIVE_W", "4", 1);
    setenv("HEADSPLIT_ENERGY_ACTIVE_W", "4.5", 1); /* explicit beats the device's */
    energy_config_default(&c);
    assert_int_equal(energy_config_from_env(&c, err, sizeof err), 0);
    assert_int_equal(c.source, ENERGY_SOURCE_MODEL);
    assert_near(c.cpu_scale, 0.35, 1e-12);
    assert_near(c.idle_w, 2.5, 1e-12);
    assert_near(c.active_w, 4.5, 1e-12);
    setenv("HEADSPLIT_DEVICE_CPU", "max", 1);
    setenv("HEADSPLIT_ENERGY_SOURCE", "rapl", 1);
    energy_config_default(&c);
    assert_int_equal(energy_config_from_env(&c, err, sizeof err), 0);
    assert_int_equal(c.source, ENERGY_SOURCE_RAPL);
    assert_near(c.cpu_scale, 1.0, 0);

    setenv("HEADSPLIT_ENERGY_SOURCE", "solar", 1);
    assert_int_equal(energy_config_from_env(&c, err, sizeof err), -1);
    assert_non_null(strstr(err, "HEADSPLIT_ENERGY_SOURCE"));
    setenv("HEADSPLIT_ENERGY_SOURCE", "auto", 1);
    setenv("HEADSPLIT_ENERGY_IDLE_W", "3W", 1);
    assert_int_equal(energy_config_from_env(&c, err, sizeof err), -1);
    assert_non_null(strstr(err, "HEADSPLIT_ENERGY_IDLE_W"));
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
}

static void test_names_and_figures(void **state)
{
    (void)state;
    EnergySource s;
    assert_int_equal(energy_source_parse("ina260", &s), 0);
    assert_int_equal(s, ENERGY_SOURCE_INA2XX);
    assert_int_equal(energy_source_parse("model-cpu-time", &s), 0);
    assert_int_equal(s, ENERGY_SOURCE_MODEL);
    assert_int_equal(energy_source_parse("rapl", &s), 0);
    assert_int_equal(s, ENERGY_SOURCE_RAPL);
    assert_int_equal(energy_source_parse("gpu", &s), -1);
    assert_string_equal(energy_source_str(ENERGY_SOURCE_AUTO), "auto");
    assert_string_equal(energy_source_str(ENERGY_SOURCE_MODEL), "model-cpu-time");

    assert_near(energy_per_token(512.0, 256), 2.0, 1e-12);
    assert_near(energy_per_token(512.0, 0), 0.0, 0);
    assert_near(energy_delay_product(2.0, 0.5), 1.0, 1e-12);

    EnergyConfig c = fake_config(ENERGY_SOURCE_MODEL);
    c.cpu_scale = 0.35;
    EnergyMeter m;
    assert_int_equal(energy_init(&m, &c, err, sizeof err), 0);
    char d[128];
    energy_describe(&m, d, sizeof d);
    assert_string_equal(d, "model-cpu-time (idle 3.80 W, active 5.00 W, cpu scale 0.35)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_model_formula, setup_root, teardown_root),
        cmocka_unit_test_setup_teardown(test_model_real_clocks, setup_root, teardown_root),
        cmocka_unit_test_setup_teardown(test_ina_power_input, setup_root, teardown_root),
        cmocka_unit_test_setup_teardown(test_ina_current_times_voltage, setup_root,
                                        teardown_root),
        cmocka_unit_test_setup_teardown(test_ina_read_error, setup_root, teardown_root),
        cmocka_unit_test_setup_teardown(test_rapl_wrap, setup_root, teardown_root),
        cmocka_unit_test_setup_teardown(test_rapl_two_packages, setup_root, teardown_root),
        cmocka_unit_test_setup_teardown(test_auto_order, setup_root, teardown_root),
        cmocka_unit_test_setup_teardown(test_forced_source_absent, setup_root, teardown_root),
        cmocka_unit_test_setup_teardown(test_bad_config, setup_root, teardown_root),
        cmocka_unit_test_setup_teardown(test_env, setup_root, teardown_root),
        cmocka_unit_test_setup_teardown(test_names_and_figures, setup_root, teardown_root),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
