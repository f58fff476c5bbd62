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

// lossParts are a contrastive loss's terms (objective.Parts).
type lossParts struct {
	infoNCE, distill float64
}

func contrastiveLoss(q, d []float32, Q, G, C int, teacher []float32, cfg ContrastiveConfig) (float64, lossParts, []float32, []float32, error) {
	loss, p, dq, dd, err := objective.ContrastiveLossParts(q, d, Q, G, C, teacher, cfg)
	return loss, lossParts{infoNCE: p.InfoNCE, distill: p.Distill}, dq, dd, err
}
