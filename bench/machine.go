package bench

import (
	"fmt"
	"slices"
	"strings"

	"github.com/scopedpm/scopedpm/hwmodel"
	"github.com/scopedpm/scopedpm/pm"
)

// Every experiment builds its machines one way: a preset, the experiment's
// own typed edit of its configuration, the user's -set (Options.Set), then
// a model. The preset is one the experiment declares (Experiment.Presets),
// so that pmbench checks a -set against it before anything runs.

// edit is an experiment's own change to a preset's configuration.
type edit func(*hwmodel.Config)

// edits applies es in order.
func edits(es ...edit) edit {
	return func(c *hwmodel.Config) {
		for _, e := range es {
			if e != nil {
				e(c)
			}
		}
	}
}

// config returns preset's configuration with e (nil: none) and then the
// run's -set applied, validated.
func (o Options) config(preset string, e edit) (hwmodel.Config, error) {
	if o.declared && !slices.Contains(o.presets, preset) {
		return hwmodel.Config{}, fmt.Errorf("bench: a machine on preset %q, which the experiment does not declare (Experiment.Presets: %s)", preset, strings.Join(o.presets, ", "))
	}
	cfg, err := hwmodel.Preset(preset)
	if err != nil {
		return hwmodel.Config{}, err
	}
	if e != nil {
		e(&cfg)
	}
	if err := cfg.Set(o.Set...); err != nil {
		return hwmodel.Config{}, err
	}
	return cfg, nil
}

// backend returns a fresh hwmodel backend on o.config(preset, e) under
// model.
func (o Options) backend(preset string, model hwmodel.Model, e edit) (*hwmodel.Backend, error) {
	cfg, err := o.config(preset, e)
	if err != nil {
		return nil, err
	}
	return hwmodel.New(cfg, model)
}

// timingBackend is o.backend for a run that never crashes (a timing
// measurement): it keeps no durable image (hwmodel's KeepNoImage), which
// leaves every cycle as it is.
func (o Options) timingBackend(preset string, model hwmodel.Model, e edit) (*hwmodel.Backend, error) {
	be, err := o.backend(preset, model, e)
	if err != nil {
		return nil, err
	}
	if err := be.KeepNoImage(); err != nil {
		return nil, err
	}
	return be, nil
}

// machine returns a fresh machine over o.backend(preset, model, e).
func (o Options) machine(preset string, model hwmodel.Model, e edit) (*pm.Machine, *hwmodel.Backend, error) {
	be, err := o.backend(preset, model, e)
	if err != nil {
		return nil, nil, err
	}
	m, err := pm.NewMachine(be)
	return m, be, err
}

// CheckSet checks the -set overrides sets against the experiments es before
// anything runs: each experiment must run hwmodel configurations (not
// NoSet), none may sweep a key of sets itself, and every preset any of them
// builds machines from (Experiment.Presets) must take the overrides.
func CheckSet(es []Experiment, sets []string) error {
	if len(sets) == 0 {
		return nil
	}
	for _, e := range es {
		if e.NoSet {
			return fmt.Errorf("-set does not apply to experiment %s (it runs no hwmodel configuration)", e.Name)
		}
		for _, kv := range sets {
			k, _, _ := strings.Cut(kv, "=")
			if k = hwmodel.CanonicalKey(strings.TrimSpace(k)); slices.Contains(e.Sweeps, k) {
				return fmt.Errorf("-set %s: experiment %s sweeps %s itself (every row would show the -set value)", kv, e.Name, k)
			}
		}
	}
	if err := CheckPresets(es, sets); err != nil {
		return fmt.Errorf("-set: %w", err)
	}
	return nil
}

// CheckPresets checks that every preset the experiments es build machines
// from (Experiment.Presets) takes the overrides sets, and that sets do not
// set persist.none: whether a machine's PM is timed as DRAM goes with its
// model (only None runs on such a machine, hwmodel.ErrPMAsDRAM), and the
// experiments choose both.
func CheckPresets(es []Experiment, sets []string) error {
	for _, kv := range sets {
		if k, _, _ := strings.Cut(kv, "="); hwmodel.CanonicalKey(strings.TrimSpace(k)) == "persist.none" {
			return fmt.Errorf("%s: %w: the experiments choose each machine's model and which machines are DRAM-only", kv, hwmodel.ErrPMAsDRAM)
		}
	}
	checked := map[string]bool{}
	for _, e := range es {
		for _, p := range e.Presets {
			if checked[p] {
				continue
			}
			checked[p] = true
			cfg, err := hwmodel.Preset(p)
			if err != nil {
				return err
			}
			if err := cfg.Set(sets...); err != nil {
				return fmt.Errorf("on preset %s (experiment %s): %w", p, e.Name, err)
			}
		}
	}
	return nil
}
