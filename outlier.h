/*
outlier.h: the outlier guard of llm.c's -sl and -sg (--skip-loss-z, --skip-grad-z). A long run now and then meets a
batch that sends the loss or the gradient norm far above its recent values (a bad shard, a rare token sequence, an
instability starting); one such update can undo hours of training. The guard keeps the last W values of each (W =
--outlier-window, llm.c's 128) and skips the update of a step whose value lies more than the threshold's number of
standard deviations above their mean.

The z-score is llm.c's: the step's value x joins the window first (pushing out the oldest), then

    mean = (1/W) sum_i x_i,   var = (1/W) sum_i x_i^2 - mean^2,   z = (x - mean) / sqrt(var)

over the W values now held (x among them; the population variance), z = 0 when var = 0, and no z-score (NaN, never
a skip) for the values that fill an empty window: the first W steps of a run only fill it. Since x is among the W
values, z is at most sqrt(W - 1) (3.87 for W = 16, 11.3 for 128): a threshold at or above that never fires, and the
trainer refuses it. We sum the held values afresh each time, in double and in arrival order (W additions, nothing
beside a training step), where llm.c keeps running sums: the two can differ in the last bits of z, never in a
decision that is not on a knife edge. Only finite values join: a non-finite loss or norm is --nan-policy's business,
and a NaN in the window would make every later z-score NaN. A skipped update's value stays in the window, as in
llm.c: should the loss move to a new level for good, the window follows it within W steps and the skipping stops.

The windows are part of the training state: a checkpoint of a run with the guard on holds both (checkpoint.h,
version 7), so a resumed run skips exactly the steps the uninterrupted one skips.
*/
#ifndef OUTLIER_H
#define OUTLIER_H

#include <math.h>
#include <string.h>

#define OUTLIER_MAX_WINDOW 1024

typedef struct {
    int window;                      // W: values a z-score needs
    int count;                       // values held (at most W)
    int next;                        // once full, where the next value goes (the oldest held)
    double vals[OUTLIER_MAX_WINDOW]; // a ring: vals[next] is the oldest once count == W
} OutlierWindow;

static void outlier_init(OutlierWindow* w, int window) {
    memset(w, 0, sizeof(*w));
    w->window = window < 1 ? 1 : window > OUTLIER_MAX_WINDOW ? OUTLIER_MAX_WINDOW : window;
}

// The i-th held value in arrival order (0: the oldest).
static double outlier_value(const OutlierWindow* w, int i) {
    return w->count < w->window ? w->vals[i] : w->vals[(w->next + i) % w->window];
}

// Adds x (when finite) and returns its z-score against the window that now holds it; NaN when x is not finite or
// joins a window that was not yet full.
static double outlier_push(OutlierWindow* w, double x) {
    if (!isfinite(x)) { return NAN; }
    if (w->count < w->window) { w->vals[w->count++] = x; return NAN; }
    w->vals[w->next] = x;
    w->next = (w->next + 1) % w->window;
    double sum = 0.0, sumsq = 0.0;
    for (int i = 0; i < w->window; i++) { // in arrival order: a window refilled from a checkpoint sums the same
        double v = outlier_value(w, i);
        sum += v;
        sumsq += v * v;
    }
    double mean = sum / w->window, var = sumsq / w->window - mean * mean;
    if (!(var > 0.0)) { return 0.0; } // (rounding can make a constant window's variance a tiny negative)
    return (x - mean) / sqrt(var);
}

// The held values in arrival order into out (count of them); the checkpoint writes them so.
static int outlier_get(const OutlierWindow* w, double* out) {
    for (int i = 0; i < w->count; i++) { out[i] = outlier_value(w, i); }
    return w->count;
}

// Refills w (its window kept) from n values in arrival order, keeping the newest W of them: a resume with another
// --outlier-window keeps as much history as both windows allow.
static void outlier_set(OutlierWindow* w, const double* vals, int n) {
    int window = w->window;
    outlier_init(w, window);
    int first = n > window ? n - window : 0;
    for (int i = first; i < n; i++) { w->vals[w->count++] = vals[i]; }
}

// Whether a step with these z-scores skips its update: a threshold of 0 is off; an undefined z-score (NaN) never
// skips. *why: "loss" or "grad_norm" (the loss is looked at first, as llm.c does).
static int outlier_skip(double z_loss, double z_norm, double skip_loss_z, double skip_grad_z, const char** why) {
    if (skip_loss_z > 0.0 && isfinite(z_loss) && z_loss > skip_loss_z) { *why = "loss"; return 1; }
    if (skip_grad_z > 0.0 && isfinite(z_norm) && z_norm > skip_grad_z) { *why = "grad_norm"; return 1; }
    *why = NULL;
    return 0;
}

#endif // OUTLIER_H
