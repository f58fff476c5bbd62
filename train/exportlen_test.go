package train

import "testing"

func TestExportMaxLength(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want int
	}{
		{Config{Objective: "contrastive", MaxLength: 128}, 0},                         // import default
		{Config{Objective: "contrastive", MaxLength: 128, ExportMaxLength: 256}, 256}, // base model's
		{Config{Objective: "listwise", MaxLength: 160}, 160},
		{Config{Objective: "bce", MaxLength: 200, ExportMaxLength: 300}, 300},
	} {
		if got := c.cfg.exportMaxLength(); got != c.want {
			t.Errorf("%+v: export max length %d, want %d", c.cfg, got, c.want)
		}
	}
}
