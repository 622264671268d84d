/* Runs one float input through a model with Tandem's C ABI and prints the
 * output: what a Wear OS app's JNI layer does. Built and run by
 * ffi/tests/c_program.rs.
 *
 * usage: run_model MODEL CONNECT|- PLACEMENT INPUT D1,D2,... INPUT.f32 OUTPUT
 * INPUT.f32 holds the input's values as little-endian floats. Prints the
 * report JSON on the first line, then the output's shape, then one value
 * per line. Exits 1 with the error on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tandem.h"

static int fail(const char *what, const char *err) {
    fprintf(stderr, "%s: %s\n", what, err);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 8 && argc != 9) {
        fprintf(stderr, "usage: %s MODEL CONNECT|- PLACEMENT INPUT D1,D2,... INPUT.f32 OUTPUT [KEYS]\n", argv[0]);
        return 2;
    }
    char err[1024];
    const char *connect = strcmp(argv[2], "-") == 0 ? NULL : argv[2];
    TandemSession *s = tandem_open(argv[1], connect, err, sizeof err);
    if (s == NULL) return fail("open", err);
    if (tandem_set_placement(s, argv[3]) != 0) {
        tandem_last_error(s, err, sizeof err);
        return fail("placement", err);
    }
    if (argc == 9 && tandem_set_keys(s, argv[8]) != 0) {
        tandem_last_error(s, err, sizeof err);
        return fail("keys", err);
    }
    if (tandem_set_latency_hint_ms(s, 0.0) != 0) return fail("hint", "refused");

    int64_t shape[8];
    size_t rank = 0;
    size_t count = 1;
    for (char *d = strtok(argv[5], ","); d != NULL && rank < 8; d = strtok(NULL, ",")) {
        shape[rank] = atoll(d);
        count *= (size_t)shape[rank];
        rank++;
    }
    float *input = malloc(count * sizeof(float));
    FILE *f = fopen(argv[6], "rb");
    if (f == NULL || input == NULL) return fail("input", argv[6]);
    if (fread(input, sizeof(float), count, f) != count) return fail("input", "too short");
    fclose(f);

    if (tandem_feed_f32(s, argv[4], shape, rank, input, count, err, sizeof err) != 0) return fail("feed", err);
    char report[4096];
    if (tandem_run(s, report, sizeof report, err, sizeof err) != 0) return fail("run", err);
    printf("%s\n", report);

    /* First the size, then the values. */
    int64_t out_shape[8];
    size_t out_rank = 8;
    long n = tandem_fetch_f32(s, argv[7], NULL, 0, out_shape, &out_rank, err, sizeof err);
    if (n < 0) return fail("fetch", err);
    float *out = malloc((size_t)n * sizeof(float));
    out_rank = 8;
    if (out == NULL || tandem_fetch_f32(s, argv[7], out, (size_t)n, out_shape, &out_rank, err, sizeof err) != n)
        return fail("fetch", err);
    for (size_t i = 0; i < out_rank; i++) printf("%s%lld", i ? "," : "", (long long)out_shape[i]);
    printf("\n");
    for (long i = 0; i < n; i++) printf("%.9g\n", out[i]);
    tandem_close(s);
    free(out);
    free(input);
    return 0;
}
