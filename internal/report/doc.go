// Package report draws anna's run reports as self-contained HTML pages with
// inline SVG plots.
//
// Two reports:
//
//   - WriteTraining: a training run (what annactl train writes to
//     DIR/report.html from what train.Run reports): the loss by step (with
//     its contrastive and distillation parts when the run has them, and the
//     held-out loss), the learning rate, the gradient norm and the held-out
//     accuracy, under a title naming the run's model, objective, batch,
//     learning rate, steps and seed. Its input is the run's metrics (internal/format/metrics: the
//     metrics JSON lines file train.Run writes).
//   - WriteEval: retrieval quality per mode for one or more datasets:
//     grouped bar charts (nDCG@10, Recall@100, MRR@10, MAP, and ms/query when
//     measured) with the modes side by side, and a table per dataset.
//
// Invariants, both tested:
//
//   - Deterministic: the same input renders to the same bytes (no clock, no
//     random ids, no map iteration in the output).
//   - Self-contained: nothing is fetched when the page is viewed: no
//     scripts, stylesheets, fonts or images by URL. The only URLs in the
//     output are the SVG namespace names in xmlns attributes, which browsers
//     never fetch.
//
// The plots are drawn by gonum.org/v1/plot through its SVG canvas
// (vg/vgsvg). Text is measured with the Liberation Sans metrics and the page
// maps that family to a local Liberation Sans, Arial or Helvetica (all three
// have the same metrics), so labels fit without embedding a font.
package report
