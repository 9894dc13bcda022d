package hwmodel

import "errors"

// Sentinel errors. Functions wrap them with %w and context (the field, the
// key, the cycle); test for them with errors.Is.
var (
	// ErrConfig: a configuration is invalid (an unknown key, a value out of
	// range, an inconsistent combination). The message names the field.
	ErrConfig = errors.New("hwmodel: invalid configuration")
	// ErrModel: an unknown persistency model.
	ErrModel = errors.New("hwmodel: unknown model")
	// ErrPreset: an unknown preset name.
	ErrPreset = errors.New("hwmodel: unknown preset")
	// ErrState: a call out of order (before Attach, during a launch, after
	// Crash).
	ErrState = errors.New("hwmodel: call out of order")
	// ErrCrashTime: CrashAt was asked for a cycle the backend no longer
	// holds the history of (before the start of the last launch).
	ErrCrashTime = errors.New("hwmodel: crash cycle out of range")
	// ErrNoImage: CrashAt or Crash on a backend told to keep no durable
	// image (KeepNoImage).
	ErrNoImage = errors.New("hwmodel: the backend keeps no durable image")
	// ErrGeometry: a launch does not fit the configured GPU.
	ErrGeometry = errors.New("hwmodel: launch does not fit the GPU")
	// ErrPMAsDRAM: New was given a machine whose PM is timed as device
	// memory (Config.Persist.None, the dram preset) and a model other than
	// None. Such a machine does no persist work, so only None describes it;
	// New refuses any other model rather than time it as None.
	ErrPMAsDRAM = errors.New("hwmodel: a machine with PM timed as DRAM (persist.none) runs the none model only")
)
