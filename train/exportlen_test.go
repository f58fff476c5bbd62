package train

import "testing"

func TestExportMaxLength(t *testing.T) {
	for _, c := range []struct {
		cfg       Config
		positions int
		want      int
	}{
		{Config{Objective: "contrastive", MaxLength: 128}, 512, 0},                         // import default
		{Config{Objective: "contrastive", MaxLength: 128, ExportMaxLength: 256}, 512, 256}, // base model's
		{Config{Objective: "listwise", MaxLength: 160}, 512, 160},
		{Config{Objective: "bce", MaxLength: 200, ExportMaxLength: 300}, 512, 300},
		{Config{Objective: "bce", MaxLength: 128}, 64, 64}, // clamped to the position table
	} {
		if got := c.cfg.exportMaxLength(c.positions); got != c.want {
			t.Errorf("%+v: export max length %d, want %d", c.cfg, got, c.want)
		}
	}
}
