package model

import (
	"fmt"
	"slices"
	"strings"
)

// Measurement is one evaluation of a reranker, kept in its manifest:
// Metric of the first-stage list Candidates (lexical, dense or hybrid) on
// Dataset's Split (Before), and of the same list with its top Depth
// reranked (After), over Queries judged queries. `annactl eval --reranker
// DIR --record` writes them.
type Measurement struct {
	Dataset    string `json:"dataset"`
	Split      string `json:"split"`
	Candidates string `json:"candidates"`
	Depth      int    `json:"depth"`
	// Fusion: the reranked list was fused by RRF with the retrieval lists
	// (engine.SearchOptions.RerankFusion) instead of replacing their order.
	Fusion  bool    `json:"rrf,omitempty"`
	Metric  string  `json:"metric"`
	Before  float64 `json:"before"`
	After   float64 `json:"after"`
	Queries int     `json:"queries"`
	// Embedder is the fingerprint of the model whose vectors made dense
	// and hybrid candidates ("" for lexical ones).
	Embedder string `json:"embedder,omitempty"`
	Date     string `json:"date"` // RFC 3339, UTC
}

func (x Measurement) validate() error {
	switch {
	case x.Dataset == "" || x.Split == "" || x.Metric == "":
		return fmt.Errorf("dataset %q, split %q and metric %q must all be set", x.Dataset, x.Split, x.Metric)
	case x.Candidates != "lexical" && x.Candidates != "dense" && x.Candidates != "hybrid":
		return fmt.Errorf("candidates %q: want lexical, dense or hybrid", x.Candidates)
	case x.Depth <= 0 || x.Queries <= 0:
		return fmt.Errorf("depth %d and queries %d must be positive", x.Depth, x.Queries)
	}
	return nil
}

// same reports whether x and y measure the same thing (and so the newer
// replaces the older).
func (x Measurement) same(y Measurement) bool {
	return x.Dataset == y.Dataset && x.Split == y.Split && x.Candidates == y.Candidates &&
		x.Depth == y.Depth && x.Fusion == y.Fusion && x.Metric == y.Metric && x.Embedder == y.Embedder
}

// Helps reports whether a reranker has been measured to help in one of
// its two uses — replacing its candidates' order, or fused with their lists
// by RRF (fusion) — that is, whether that use has measurements and on each
// left the metric at least where its candidates had it; and which use,
// the one with the larger mean gain when both do. It is what anna asks
// before using a reranker nobody named.
func (m *Manifest) Helps() (helps, fusion bool) {
	best := 0.0
	for _, f := range []bool{false, true} {
		if gain, _ := m.Gain(f); m.HelpsIn(f) && (!helps || gain > best) {
			helps, fusion, best = true, f, gain
		}
	}
	return helps, fusion
}

// HelpsIn reports whether a reranker has been measured in one use
// (fusion or not) and, on each of those measurements, left the metric at
// least where its candidates had it.
func (m *Manifest) HelpsIn(fusion bool) bool {
	_, n, worse := m.gain(fusion)
	return m.Task == TaskRerank && n > 0 && !worse
}

// Gain is the mean of After − Before over the measurements of one use
// (fusion or not), and how many there are.
func (m *Manifest) Gain(fusion bool) (gain float64, n int) {
	gain, n, _ = m.gain(fusion)
	return gain, n
}

func (m *Manifest) gain(fusion bool) (gain float64, n int, worse bool) {
	for _, x := range m.Measured {
		if x.Fusion == fusion {
			gain += x.After - x.Before
			n++
			worse = worse || x.After < x.Before
		}
	}
	if n > 0 {
		gain /= float64(n)
	}
	return gain, n, worse
}

// RecordMeasurements adds ms to the reranker manifest in dir, each
// replacing an earlier measurement of the same thing, and rewrites the
// manifest atomically. The model's files and fingerprint are unchanged.
func RecordMeasurements(dir string, ms []Measurement) error {
	m, err := LoadManifest(dir)
	if err != nil {
		return err
	}
	if m.Task != TaskRerank {
		return fmt.Errorf("model: %s is a %s model; measurements are a reranker's", dir, m.Task)
	}
	for _, x := range ms {
		if err := x.validate(); err != nil {
			return fmt.Errorf("model: measurement: %w", err)
		}
		m.Measured = slices.DeleteFunc(m.Measured, x.same)
		m.Measured = append(m.Measured, x)
	}
	return WriteManifest(dir, m)
}

// Verdict says what a reranker's measurements say, for people: whether it
// helps (and in which use anna takes it unasked) and the mean nDCG@10
// gain of each use measured.
func (m *Manifest) Verdict() string {
	if len(m.Measured) == 0 {
		return "not measured"
	}
	h, f := m.Helps()
	var parts []string
	for _, use := range []bool{false, true} {
		g, n := m.Gain(use)
		if n == 0 {
			continue
		}
		how := "replacing the candidates' order"
		if use {
			how = "fused with the candidates' lists by RRF"
		}
		parts = append(parts, fmt.Sprintf("%s nDCG@10 %+.4f over %d", how, g, n))
	}
	state := "does not help"
	if h {
		state = "helps (used unasked, " + map[bool]string{false: "replacing", true: "fused by RRF"}[f] + ")"
	}
	return state + ": " + strings.Join(parts, "; ")
}
