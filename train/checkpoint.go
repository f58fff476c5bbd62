package train

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/anna-search/anna/internal/model/safetensors"
)

// state.json in a checkpoint.
type runState struct {
	Step     int     `json:"step"`
	Steps    int     `json:"steps"`
	Loss     float64 `json:"loss"`
	Seed     uint64  `json:"seed"`
	Data     string  `json:"data"`
	Examples int     `json:"examples"`
}

// saveCheckpoint writes the trained params, the optimizer moments and the
// state to dir atomically (a temporary directory renamed over the old
// one). Frozen params (LoRA's base, kept compact or not) are left out: a
// resumed run loads them from the model again, as the first run did.
func saveCheckpoint(dir string, ps []*Param, opt *AdamW, st runState) error {
	tmp := dir + ".tmp"
	os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	params, moments := map[string]*safetensors.Tensor{}, map[string]*safetensors.Tensor{}
	for _, p := range ps {
		if p.Frozen {
			continue
		}
		params[p.Name] = &safetensors.Tensor{Name: p.Name, Shape: p.Shape, Data: p.W}
		if mm, ok := opt.m[p]; ok {
			moments["m."+p.Name] = &safetensors.Tensor{Name: "m." + p.Name, Shape: p.Shape, Data: mm}
			moments["v."+p.Name] = &safetensors.Tensor{Name: "v." + p.Name, Shape: p.Shape, Data: opt.v[p]}
		}
	}
	if err := safetensors.WriteFile(filepath.Join(tmp, "params.safetensors"), params, nil); err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	if len(moments) > 0 {
		if err := safetensors.WriteFile(filepath.Join(tmp, "optimizer.safetensors"), moments, map[string]string{"step": fmt.Sprint(opt.Step)}); err != nil {
			return fmt.Errorf("train: checkpoint: %w", err)
		}
	}
	sb, _ := json.MarshalIndent(struct {
		runState
		OptimizerStep int `json:"optimizer_step"`
	}{st, opt.Step}, "", "  ")
	if err := os.WriteFile(filepath.Join(tmp, "state.json"), sb, 0o644); err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	old := dir + ".old"
	os.RemoveAll(old)
	if _, err := os.Stat(dir); err == nil {
		if err := os.Rename(dir, old); err != nil {
			return fmt.Errorf("train: checkpoint: %w", err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	os.RemoveAll(old)
	return nil
}

// errNoCheckpoint: there is no checkpoint to resume (no state.json).
var errNoCheckpoint = errors.New("train: no checkpoint")

// loadCheckpoint restores params and optimizer state saved by
// saveCheckpoint. Only a missing state.json means "no checkpoint"
// (errNoCheckpoint); a checkpoint that has one but lacks a file it names is
// an error, never a fresh start over the progress it holds.
func loadCheckpoint(dir string, ps []*Param, opt *AdamW) (runState, error) {
	var st struct {
		runState
		OptimizerStep int `json:"optimizer_step"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if errors.Is(err, os.ErrNotExist) {
		return st.runState, errNoCheckpoint
	}
	if err != nil {
		return st.runState, fmt.Errorf("train: checkpoint: %w", err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st.runState, fmt.Errorf("train: checkpoint %s/state.json: %w", dir, err)
	}
	params, err := safetensors.ReadFile(filepath.Join(dir, "params.safetensors"))
	if err != nil {
		return st.runState, fmt.Errorf("train: checkpoint: %w", err)
	}
	var moments map[string]*safetensors.Tensor
	if st.OptimizerStep > 0 {
		if moments, err = safetensors.ReadFile(filepath.Join(dir, "optimizer.safetensors")); err != nil {
			return st.runState, fmt.Errorf("train: checkpoint: %w", err)
		}
	}
	for _, p := range ps {
		if p.Frozen {
			continue // not saved (an older checkpoint has it, unchanged)
		}
		t, ok := params[p.Name]
		if !ok || len(t.Data) != len(p.W) {
			return st.runState, fmt.Errorf("train: checkpoint %s does not match the model: tensor %s missing or misshapen (was it made with other LoRA settings?)", dir, p.Name)
		}
		copy(p.W, t.Data)
		if mt, ok := moments["m."+p.Name]; ok {
			mm, vv := opt.moments(p)
			copy(mm, mt.Data)
			copy(vv, moments["v."+p.Name].Data)
		}
	}
	opt.Step = st.OptimizerStep
	return st.runState, nil
}
