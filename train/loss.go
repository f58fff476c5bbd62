package train

import "github.com/anna-search/anna/train/objective"

// The losses live in train/objective, shared with the decoder trainer.

// ContrastiveConfig sets the bi-encoder objective (objective.ContrastiveConfig).
type ContrastiveConfig = objective.ContrastiveConfig

// ContrastiveLoss is objective.ContrastiveLoss.
func ContrastiveLoss(q, d []float32, Q, G, C int, teacher []float32, cfg ContrastiveConfig) (loss float64, dq, dd []float32, err error) {
	return objective.ContrastiveLoss(q, d, Q, G, C, teacher, cfg)
}

// CrossConfig sets a cross-encoder objective's distillation term
// (objective.CrossConfig).
type CrossConfig = objective.CrossConfig
