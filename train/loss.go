package train

import "github.com/anna-search/anna/train/objective"

// The losses live in train/objective, shared with the decoder trainer.

// ContrastiveConfig sets the bi-encoder objective (objective.ContrastiveConfig).
type ContrastiveConfig = objective.ContrastiveConfig

// ContrastiveLoss is objective.ContrastiveLoss.
func ContrastiveLoss(q, d []float32, Q, G, C int, teacher []float32, cfg ContrastiveConfig) (loss float64, dq, dd []float32, err error) {
	return objective.ContrastiveLoss(q, d, Q, G, C, teacher, cfg)
}

// BCELoss is objective.BCELoss.
func BCELoss(logits, labels []float32) (loss float64, dlogits []float32) {
	return objective.BCELoss(logits, labels)
}

// ListwiseLoss is objective.ListwiseLoss.
func ListwiseLoss(logits []float32, Q, G int) (loss float64, dlogits []float32) {
	return objective.ListwiseLoss(logits, Q, G)
}
