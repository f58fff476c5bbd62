package train

// store is where a run's weights, gradients and AdamW moments live: the
// host's Params (hostStore) or a device's (deviceNet, deviceTechnique).
// params are the host Params a checkpoint holds.
type store interface {
	params() []*Param
	zeroGrad() error
	clip(maxNorm float64) (float64, error)
	update(opt *AdamW, lr float64) error
	toHost(opt *AdamW) error   // before a checkpoint or the export reads the params
	fromHost(opt *AdamW) error // after a checkpoint restored them
}

// hostStore is a store on the host: zero clears the gradients.
type hostStore struct {
	ps   []*Param
	zero func()
}

func (h hostStore) params() []*Param { return h.ps }
func (h hostStore) zeroGrad() error {
	h.zero()
	return nil
}
func (h hostStore) clip(maxNorm float64) (float64, error) { return ClipGradNorm(h.ps, maxNorm), nil }
func (h hostStore) update(opt *AdamW, lr float64) error {
	opt.Update(h.ps, lr)
	return nil
}
func (hostStore) toHost(*AdamW) error   { return nil }
func (hostStore) fromHost(*AdamW) error { return nil }
