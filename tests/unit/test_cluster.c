/* The cluster's text forms and the start-up's pure steps: link specs (keys, presets, media),
 * link matrices and devices files (good files, and bad ones whose errors name the file and
 * line), the stabilisation of measured speeds and latencies, and the planner inputs derived
 * from a measured cluster. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cluster.h"
#include "inputs.h"
#include "netmodel.h"
#include "util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Writes text to a fresh temporary file; returns its path (static buffer per slot). */
static const char *tmp_file(int slot, const char *text)
{
    static char paths[4][64];
    snprintf(paths[slot], sizeof paths[slot], "/tmp/hs_test_cluster_%d_%d.txt", (int)getpid(),
             slot);
    FILE *f = fopen(paths[slot], "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return paths[slot];
}

static void test_parse_link_keys(void **state)
{
    (void)state;
    NetLink l;
    char err[256] = "";
    assert_int_equal(cluster_parse_link("rtt=10ms,jitter=2ms,bw=200mbit", &l, err, sizeof err),
                     0);
    assert_true(fabs(l.rtt_s - 10e-3) < 1e-12);
    assert_true(fabs(l.jitter_s - 2e-3) < 1e-12);
    assert_true(fabs(l.bw_Bps - 25e6) < 1e-6);
    assert_int_equal(l.medium, MEDIUM_SWITCHED);
    assert_int_equal(l.relay_ap, 0);
    /* units: bare times are ms, bare rates mbit; s, us, gbit, kbit, MB */
    assert_int_equal(cluster_parse_link("rtt=1s,jitter=500us,bw=1gbit", &l, err, sizeof err), 0);
    assert_true(fabs(l.rtt_s - 1.0) < 1e-12 && fabs(l.jitter_s - 5e-4) < 1e-12);
    assert_true(fabs(l.bw_Bps - 125e6) < 1e-3);
    assert_int_equal(cluster_parse_link("rtt=4,bw=8", &l, err, sizeof err), 0);
    assert_true(fabs(l.rtt_s - 4e-3) < 1e-12 && fabs(l.bw_Bps - 1e6) < 1e-6);
    assert_int_equal(cluster_parse_link("bw=3MB", &l, err, sizeof err), 0);
    assert_true(fabs(l.bw_Bps - 3e6) < 1e-6);
    assert_int_equal(cluster_parse_link("medium=shared,relay=ap", &l, err, sizeof err), 0);
    assert_int_equal(l.medium, MEDIUM_SHARED);
    assert_int_equal(l.relay_ap, 1);
}

static void test_parse_link_presets(void **state)
{
    (void)state;
    NetLink l;
    char err[256] = "";
    assert_int_equal(cluster_parse_link("wifi", &l, err, sizeof err), 0);
    assert_true(fabs(l.rtt_s - 10e-3) < 1e-12 && fabs(l.jitter_s - 2e-3) < 1e-12);
    assert_true(fabs(l.bw_Bps - 200e6 / 8) < 1e-6);
    assert_int_equal(l.medium, MEDIUM_SHARED);
    assert_int_equal(l.relay_ap, 1);
    assert_int_equal(cluster_parse_link("ethernet", &l, err, sizeof err), 0);
    assert_true(fabs(l.rtt_s - 0.2e-3) < 1e-12 && l.jitter_s == 0);
    assert_true(fabs(l.bw_Bps - 1e9 / 8) < 1e-6);
    assert_int_equal(l.medium, MEDIUM_SWITCHED);
    assert_int_equal(l.relay_ap, 0);
    /* left to right: a key after a preset changes it, a preset after a key replaces it */
    assert_int_equal(cluster_parse_link("wifi,rtt=20ms", &l, err, sizeof err), 0);
    assert_true(fabs(l.rtt_s - 20e-3) < 1e-12 && l.medium == MEDIUM_SHARED);
    assert_int_equal(cluster_parse_link("rtt=20ms,ethernet", &l, err, sizeof err), 0);
    assert_true(fabs(l.rtt_s - 0.2e-3) < 1e-12);
}

static void expect_link_error(const char *spec, const char *needle)
{
    NetLink l;
    char err[256] = "";
    assert_int_equal(cluster_parse_link(spec, &l, err, sizeof err), -1);
    if (!strstr(err, needle))
        fail_msg("'%s': error '%s' does not mention '%s'", spec, err, needle);
}

static void test_parse_link_errors(void **state)
{
    (void)state;
    expect_link_error("", "empty");
    expect_link_error(",,", "empty");
    expect_link_error("rtt", "'rtt'");
    expect_link_error("lan", "'lan'");
    expect_link_error("loss=1%", "'loss'");
    expect_link_error("rtt=abc", "rtt=abc");
    expect_link_error("rtt=-3ms", "rtt=-3ms");
    expect_link_error("rtt=10parsecs", "rtt=10parsecs");
    expect_link_error("bw=fast", "bw=fast");
    expect_link_error("bw=10mph", "rate");
    expect_link_error("jitter=nan", "jitter=nan");
    expect_link_error("medium=air", "medium=air");
    expect_link_error("relay=satellite", "relay=satellite");
    expect_link_error("medium=switched,relay=ap", "relay=ap");
}

static void test_link_matrix(void **state)
{
    (void)state;
    const char *path = tmp_file(0, "# links of four ranks\n"
                                   "* * rtt=10ms,bw=100mbit\n"
                                   "\n"
                                   "0 2 rtt=2ms   # controller to rank 2\n"
                                   "3 * wifi\n");
    NetLink m[16];
    memset(m, 0, sizeof m);
    char err[256] = "";
    assert_int_equal(cluster_load_link_matrix(path, 4, m, err, sizeof err), 0);
    for (int i = 0; i < 4; i++)
        assert_true(m[i * 4 + i].rtt_s == 0); /* the diagonal is never set */
    assert_true(fabs(m[0 * 4 + 1].rtt_s - 10e-3) < 1e-12);
    assert_true(fabs(m[0 * 4 + 1].bw_Bps - 12.5e6) < 1e-6);
    assert_true(fabs(m[0 * 4 + 2].rtt_s - 2e-3) < 1e-12); /* later lines override */
    assert_true(m[0 * 4 + 2].bw_Bps == 0);                /* a whole new link */
    assert_true(fabs(m[2 * 4 + 0].rtt_s - 10e-3) < 1e-12); /* directed */
    assert_int_equal(m[3 * 4 + 1].medium, MEDIUM_SHARED);
    assert_int_equal(m[1 * 4 + 3].medium, MEDIUM_SWITCHED);
    unlink(path);
}

static void expect_file_error(int devices, const char *text, int size, const char *needle)
{
    const char *path = tmp_file(1, text);
    char err[512] = "", want[256];
    int rc;
    if (devices) {
        size_t mem[8];
        double speed[8];
        rc = cluster_load_devices(path, size, mem, speed, err, sizeof err);
    } else {
        NetLink m[64];
        rc = cluster_load_link_matrix(path, size, m, err, sizeof err);
    }
    assert_int_equal(rc, -1);
    snprintf(want, sizeof want, "%s:%s", path, needle);
    if (!strstr(err, want))
        fail_msg("error '%s' does not contain '%s'", err, want);
    unlink(path);
}

static void test_link_matrix_errors(void **state)
{
    (void)state;
    expect_file_error(0, "0 1\n", 3, "1: expected");
    expect_file_error(0, "# fine\n0 1 rtt=1ms\n0 1 rtt=1ms extra\n", 3, "3: expected");
    expect_file_error(0, "0 1 rtt=1ms\n0 1 rtt=fast\n", 3, "2: rtt=fast");
    expect_file_error(0, "0 3 rtt=1ms\n", 3, "1: '3' is not a rank 0..2");
    expect_file_error(0, "x 1 rtt=1ms\n", 3, "1: 'x' is not a rank");
    expect_file_error(0, "-1 1 rtt=1ms\n", 3, "1: '-1' is not a rank");
    expect_file_error(0, "0 1 medium=air\n", 3, "1: medium=air");
    NetLink m[4];
    char err[256] = "";
    assert_int_equal(cluster_load_link_matrix("/nonexistent/links.txt", 2, m, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "/nonexistent/links.txt"));
}

static void test_devices_file(void **state)
{
    (void)state;
    const char *path = tmp_file(2, "# budgets\n1 mem=1.5G speed=0.5\n\n3 speed=2   # fast\n"
                                   "2 mem=512M\n");
    size_t mem[4];
    double speed[4];
    char err[256] = "";
    assert_int_equal(cluster_load_devices(path, 4, mem, speed, err, sizeof err), 0);
    assert_true(mem[0] == 0 && speed[0] == 0);
    assert_true(mem[1] == (size_t)(1.5 * 1024 * 1024 * 1024) && speed[1] == 0.5);
    assert_true(mem[2] == (size_t)512 << 20 && speed[2] == 0);
    assert_true(mem[3] == 0 && speed[3] == 2.0);
    unlink(path);
}

static void test_devices_file_errors(void **state)
{
    (void)state;
    expect_file_error(1, "0 mem=1G\n", 3, "1: '0' is not a worker rank 1..2");
    expect_file_error(1, "\n\n3 mem=1G\n", 3, "3: '3' is not a worker rank 1..2");
    expect_file_error(1, "one mem=1G\n", 3, "1: 'one' is not a worker rank");
    expect_file_error(1, "1 mem=lots\n", 3, "1: 'mem=lots' is not mem=SIZE or speed=X");
    expect_file_error(1, "1 speed=0\n", 3, "1: 'speed=0' is not");
    expect_file_error(1, "1 speed=-1\n", 3, "1: 'speed=-1' is not");
    expect_file_error(1, "1 speed=fast\n", 3, "1: 'speed=fast' is not");
    expect_file_error(1, "1 mem=1G\n2 cores=4\n", 3, "2: 'cores=4' is not");
    size_t mem[2];
    double speed[2];
    char err[256] = "";
    assert_int_equal(cluster_load_devices("/nonexistent/dev.txt", 2, mem, speed, err,
                                          sizeof err), -1);
    assert_non_null(strstr(err, "/nonexistent/dev.txt"));
}

static void test_stabilise_speeds(void **state)
{
    (void)state;
    double alike[4] = {1.0, 0.8, 0.95, 0.71}; /* within 30%: identical boards */
    cluster_stabilise_speeds(alike, 4);
    for (int i = 0; i < 4; i++)
        assert_true(alike[i] == 1.0);
    double mixed[3] = {1.0, 0.5, 0.26}; /* else rounded to 5% of the fastest */
    cluster_stabilise_speeds(mixed, 3);
    assert_true(mixed[0] == 1.0 && mixed[1] == 0.5 && mixed[2] == 0.25);
    double scaled[2] = {4.0, 1.0}; /* relative to the fastest, whatever the scale */
    cluster_stabilise_speeds(scaled, 2);
    assert_true(scaled[0] == 1.0 && scaled[1] == 0.25);
    cluster_stabilise_speeds(NULL, 0); /* nothing to do */
}

static void test_stabilise_latencies(void **state)
{
    (void)state;
    /* a LAN keeps its latencies (rounded to 0.1 ms); a loopback's round to 0 */
    double lan[9] = {0, 0.13, 0.11, 0.12, 0, 0.14, 0.1, 0.13, 0};
    cluster_stabilise_latencies(lan, 3);
    for (int i = 0; i < 9; i++)
        assert_true(fabs(lan[i] - (i % 4 == 0 ? 0 : 0.1)) < 1e-12);
    double loop[4] = {0, 0.02, 0.03, 0};
    cluster_stabilise_latencies(loop, 2);
    for (int i = 0; i < 4; i++)
        assert_true(loop[i] == 0);
    /* uniform: within a factor 2, all the (upper) median rounded to 0.1 ms */
    double uni[9] = {7, 5.02, 6.1, 5.5, 9, 6.0, 4.9, 5.7, 3};
    cluster_stabilise_latencies(uni, 3);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            assert_true(fabs(uni[i * 3 + j] - (i == j ? 0 : 5.7)) < 1e-12);
    /* mixed: each rounded to 0.1 ms */
    double mix[4] = {0, 1.04, 20.06, 0};
    cluster_stabilise_latencies(mix, 2);
    assert_true(mix[0] == 0 && mix[3] == 0);
    assert_true(fabs(mix[1] - 1.0) < 1e-12 && fabs(mix[2] - 20.1) < 1e-12);
    /* noise does not change the result */
    double a[4] = {0, 5.01, 5.03, 0}, b[4] = {0, 4.98, 5.04, 0};
    cluster_stabilise_latencies(a, 2);
    cluster_stabilise_latencies(b, 2);
    assert_memory_equal(a, b, sizeof a);
}

static void test_latency_sd(void **state)
{
    (void)state;
    double rtt[4] = {0, 10, 10, 0}, p95[4] = {0, 10 + 1.645 * sqrt(2.0), 10, 0};
    double lat[4] = {0, 5, 5, 0};
    /* median of {1, 0} is 0.5 */
    assert_true(fabs(cluster_latency_sd_ms(rtt, p95, lat, 2) - 0.5) < 1e-12);
    double lan[4] = {0, 0, 0, 0};
    assert_true(cluster_latency_sd_ms(rtt, p95, lan, 2) == 0);
}

static ModelConfig small_config(void)
{
    ModelConfig c = {ARCH_LLAMA, 64, 5, 8, 4, 8, 172, 512, 512, 1e-5f, 10000.0f,
                     ROPE_INTERLEAVED, 1, 1, 2, {0}, "", 0, 0, 0, {0}, 0, 0, 0};
    return c;
}

/* The planner's speed of rank r relative to the fastest worker, as the placements read it. */
static double rel_speed(const Cluster *cl, int r)
{
    double fastest = 0;
    for (int k = 1; k < cl->n; k++)
        fastest = cl->dev[k].speed_Bps > fastest ? cl->dev[k].speed_Bps : fastest;
    return cl->dev[r].speed_Bps / fastest;
}

/* The planner's one-way latency a -> b in ms, as the cost model reads it. */
static double lat_ms(const Cluster *cl, int a, int b)
{
    return net_latency_s(cluster_link(cl, a, b)) * 1e3;
}

static void test_inputs_derive(void **state)
{
    (void)state;
    ModelConfig c = small_config();
    ClusterInputs ci;
    inputs_init(&ci, 4);
    const double sp[4] = {20e9, 10e9, 5e9, 9e9};
    for (int r = 0; r < 4; r++) {
        ci.cluster.dev[r].speed_Bps = sp[r];
        ci.cluster.dev[r].mem_budget = (size_t)r << 20;
    }
    for (int i = 0; i < 16; i++) {
        ci.rtt_ms[i] = i / 4 == i % 4 ? 0 : 10.0;
        ci.rtt_p95_ms[i] = ci.rtt_ms[i];
    }
    ci.cluster.link[1].bw_Bps = 25e6;
    inputs_derive(&ci, &c, NULL, NULL);
    assert_true(ci.ref_Bps == 10e9); /* the fastest worker */
    /* the planner's cluster: speeds relative to ref_Bps (times it), budgets, latencies */
    const ClusterDevice *pd = ci.planner.dev;
    assert_true(rel_speed(&ci.planner, 1) == 1.0 && rel_speed(&ci.planner, 2) == 0.5 &&
                rel_speed(&ci.planner, 3) == 0.9);
    assert_true(pd[3].mem_budget == (size_t)3 << 20);
    assert_true(lat_ms(&ci.planner, 0, 1) == 5.0 && lat_ms(&ci.planner, 0, 0) == 0 &&
                ci.lat_sd_ms == 0);
    for (int i = 0; i < 16; i++)
        assert_true(ci.planner.link[i].bw_Bps == 25e6);
    double want_ms = (512.0 + 1.0) * 64 * sizeof(float) / 20e9 * 1e3; /* f32 rows, norm */
    assert_true(fabs(ci.controller_ms - want_ms) < 1e-15);
    PlanRequest req;
    memset(&req, 0, sizeof req);
    inputs_fill_request(&ci, &req);
    assert_int_equal(req.n_workers, 3);
    assert_ptr_equal(req.cluster, &ci.planner);
    assert_true(req.ref_Bps == ci.ref_Bps && req.fixed_ms == ci.controller_ms);

    /* a devices file: budgets replace, speeds are fractions of the fastest probed worker */
    size_t fmem[4] = {0, 0, 7 << 20, 0};
    double fsp[4] = {0, 0, 0.25, 0};
    inputs_derive(&ci, &c, fmem, fsp);
    assert_true(ci.cluster.dev[2].speed_Bps == 2.5e9);
    assert_true(ci.planner.dev[2].mem_budget == (size_t)7 << 20 &&
                rel_speed(&ci.planner, 2) == 0.25);
    assert_true(ci.planner.dev[1].mem_budget == (size_t)1 << 20);
    inputs_free(&ci);
    inputs_free(&ci); /* twice: a zeroed struct */
}

static void test_inputs_alike_and_assumed(void **state)
{
    (void)state;
    ModelConfig c = small_config();
    ClusterInputs ci;
    inputs_init(&ci, 3);
    ci.cluster.dev[0].speed_Bps = 5e9;
    ci.cluster.dev[1].speed_Bps = 10e9;
    ci.cluster.dev[2].speed_Bps = 8e9;
    ci.assume_rtt_ms = 4;
    inputs_derive(&ci, &c, NULL, NULL);
    /* boards alike: speed 1.0 at their median, not the fastest's */
    assert_true(rel_speed(&ci.planner, 1) == 1.0 && rel_speed(&ci.planner, 2) == 1.0);
    assert_true(ci.ref_Bps == 9e9);
    for (int i = 0; i < 9; i++)
        assert_true(lat_ms(&ci.planner, i / 3, i % 3) == (i / 3 == i % 3 ? 0 : 2.0));
    assert_true(ci.lat_sd_ms == 0);
    for (int i = 0; i < 9; i++)
        assert_true(ci.planner.link[i].bw_Bps == 0);
    inputs_free(&ci);
}

/* The project's catalogue: parses, names the boards both tools use, and its CPU shares agree
 * with its speeds (cpu = speed / 38.4 GB/s, the development host's core). */
static void test_catalogue_file(void **state)
{
    (void)state;
    CatalogueEntry *cat;
    int n;
    char err[512] = "";
    if (cluster_load_catalogue(HEADSPLIT_SOURCE_DIR "/share/devices.tsv", &cat, &n, err,
                               sizeof err) < 0)
        fail_msg("%s", err);
    int draw = 0, have_pi4 = 0;
    for (int i = 0; i < n; i++) {
        const CatalogueEntry *e = &cat[i];
        draw += e->draw;
        if (!strcmp(e->dev.name, "pi4")) {
            have_pi4 = 1;
            assert_true(e->cpu_share == 0.125 && e->dev.speed_Bps == 4.8e9);
            assert_true(e->cores == 4 && e->board_bw_Bps == 5.5e9);
            assert_true(e->mem_limit == (size_t)(3.5 * 1024 * 1024 * 1024));
            assert_true(e->dev.mem_budget == (size_t)2e9);
            assert_true(e->idle_w == 3.8 && e->active_w == 5.0 && e->draw);
            assert_string_equal(e->what, "Raspberry Pi 4 Model B, 4 GB (Cortex-A72 1.5 GHz)");
        }
        if (e->dev.speed_Bps > 0)
            assert_true(fabs(e->dev.speed_Bps / 38.4e9 - e->cpu_share) < 5e-4);
        else
            assert_true(e->cpu_share == 0);
    }
    assert_true(have_pi4);
    assert_true(draw >= 2);
    free(cat);
}

static void expect_catalogue_error(const char *text, const char *needle)
{
    const char *path = tmp_file(3, text);
    CatalogueEntry *cat = (CatalogueEntry *)1;
    int n = 5;
    char err[512] = "", want[256];
    assert_int_equal(cluster_load_catalogue(path, &cat, &n, err, sizeof err), -1);
    assert_null(cat);
    assert_int_equal(n, 0);
    snprintf(want, sizeof want, "%s:%s", path, needle);
    if (!strstr(err, want))
        fail_msg("error '%s' does not contain '%s'", err, want);
    unlink(path);
}

static void test_catalogue_errors(void **state)
{
    (void)state;
    const char *ok = "a 4.8 0.125 4 5.5 3.5G 2 80 3.8 5.0 1 board A\n";
    char buf[512];
    expect_catalogue_error("# nothing\n", " no devices");
    expect_catalogue_error("a 4.8 0.125 4 - 3.5G 2\n", "1: column load_MBps missing");
    snprintf(buf, sizeof buf, "%sb fast 0.1 1 - 1G 1 80 - - 1 B\n", ok);
    expect_catalogue_error(buf, "2: speed_GBps 'fast' is not valid");
    expect_catalogue_error("a 4.8 0 1 - 1G 1 80 - - 1 A\n", "1: cpu '0' is not valid");
    expect_catalogue_error("a 4.8 0.1 2.5 - 1G 1 80 - - 1 A\n", "1: cores '2.5' is not valid");
    expect_catalogue_error("a 4.8 0.1 0 - 1G 1 80 - - 1 A\n", "1: cores '0' is not valid");
    expect_catalogue_error("a 4.8 0.1 4 fast 1G 1 80 - - 1 A\n", "1: bw_GBps 'fast' is not");
    expect_catalogue_error("a 4.8 0.1 1 - lots 1 80 - - 1 A\n", "1: mem 'lots' is not valid");
    expect_catalogue_error("a 4.8 0.1 1 - 1G 1 -5 - - 1 A\n", "1: load_MBps '-5' is not valid");
    expect_catalogue_error("a 4.8 0.1 1 - 1G 1 80 3 - 1 A\n", "1: 'a': give both");
    expect_catalogue_error("a 4.8 0.1 1 - 1G 1 80 - - yes A\n", "1: draw 'yes' is not valid");
    expect_catalogue_error("a 4.8 0.1 1 - 1G many 80 - - 1 A\n", "1: budget_GB 'many' is not");
    expect_catalogue_error("a 4.8 0.1 1 - 1G 2 80 - - 1 A\n", "1: 'a': budget_GB 2 is more than");
    expect_catalogue_error("a max max - max max max - - - 1 A\n", "1: 'a' is drawn");
    expect_catalogue_error("a-name-longer-than-twenty-three 1 0.1 1 - 1G 1 80 - - 0 A\n",
                           "1: name 'a-name-longer");
    snprintf(buf, sizeof buf, "%s\n%s", ok, ok);
    expect_catalogue_error(buf, "3: device 'a' is listed twice");
    CatalogueEntry *cat;
    int n;
    char err[256];
    assert_int_equal(cluster_load_catalogue("/nonexistent/devices.tsv", &cat, &n, err,
                                            sizeof err), -1);
    assert_non_null(strstr(err, "/nonexistent/devices.tsv"));
    /* a minimal good one: max and - where allowed, no description */
    const char *path = tmp_file(3, "u max max - max max max - - - 0\n");
    assert_int_equal(cluster_load_catalogue(path, &cat, &n, err, sizeof err), 0);
    assert_int_equal(n, 1);
    assert_true(cat[0].dev.speed_Bps == 0 && cat[0].dev.mem_budget == 0 && !cat[0].draw);
    assert_true(cat[0].cores == 1 && cat[0].board_bw_Bps == 0);
    assert_string_equal(cat[0].what, "");
    free(cat);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_link_keys),
        cmocka_unit_test(test_parse_link_presets),
        cmocka_unit_test(test_parse_link_errors),
        cmocka_unit_test(test_link_matrix),
        cmocka_unit_test(test_link_matrix_errors),
        cmocka_unit_test(test_devices_file),
        cmocka_unit_test(test_devices_file_errors),
        cmocka_unit_test(test_stabilise_speeds),
        cmocka_unit_test(test_stabilise_latencies),
        cmocka_unit_test(test_latency_sd),
        cmocka_unit_test(test_inputs_derive),
        cmocka_unit_test(test_inputs_alike_and_assumed),
        cmocka_unit_test(test_catalogue_file),
        cmocka_unit_test(test_catalogue_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
