/* A C app (what JNI, Swift or ctypes would do): run MNIST on one image,
 * with the handheld at argv[2] ("host:port") or on the watch alone. */
#include <stdio.h>
#include "tandem.h"

int main(int argc, char **argv) {
    const char *model = argc > 1 ? argv[1] : "models/cache/zoo/mnist.onnx";
    const char *handheld = argc > 2 ? argv[2] : NULL; /* NULL: run locally */
    char err[512], report[4096];

    TandemSession *s = tandem_open(model, handheld, err, sizeof err);
    if (!s) { fprintf(stderr, "open: %s\n", err); return 1; }
    tandem_set_latency_hint_ms(s, 100.0);

    float image[28 * 28];
    for (int i = 0; i < 28 * 28; i++) image[i] = (float)(i % 28) / 28.0f;
    const int64_t shape[] = {1, 1, 28, 28};
    if (tandem_feed_f32(s, "input", shape, 4, image, 28 * 28, err, sizeof err) != 0 ||
        tandem_run(s, report, sizeof report, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        tandem_close(s);
        return 1;
    }
    float scores[10];
    int64_t out_shape[4];
    size_t rank = 4;
    long n = tandem_fetch_f32(s, "output", scores, 10, out_shape, &rank, err, sizeof err);
    if (n < 0) { fprintf(stderr, "fetch: %s\n", err); tandem_close(s); return 1; }
    printf("report: %s\n", report);
    printf("%ld scores, first %.4f\n", n, scores[0]);
    tandem_close(s);
    return 0;
}
