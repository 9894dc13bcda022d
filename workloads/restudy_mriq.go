package workloads

import (
	"fmt"
	"math"

	"github.com/scopedpm/scopedpm/scope"
)

// MRIQShape sizes mri-q's ComputePhiMag: K k-space samples, Threads threads
// per block (a thread per sample).
type MRIQShape struct{ K, Threads int }

func mriqShape(s Size) MRIQShape {
	return bySize(s, MRIQShape{K: 12, Threads: 4}, MRIQShape{K: 1024, Threads: 256},
		// The re-study ran Parboil mri-q's small dataset
		// (datasets/mri-q/small/input/32_32_32_dataset.bin: numK = 3072)
		// with 512 threads a block (KERNEL_PHI_MAG_THREADS_PER_BLOCK in
		// its mri-q/src/nvm/computeQ.cu).
		MRIQShape{K: 3072, Threads: 512})
}

// NewMRIQ returns the re-study's mri-q1 (Parboil mri-q's
// ComputePhiMag_GPU), written afresh: a short-running, idempotent map whose
// thread per k-space sample reads the sample's real and imaginary phi from
// PM and stores its squared magnitude, real² + imag², in float32, to
// mriq.phimag. (mri-q2, ComputeQ, is a long-running kernel the re-study
// puts in its LS figures; it is not written here.)
//
// Check compares the magnitudes with float32 arithmetic done in Go.
func NewMRIQ(sh MRIQShape, s Scheme, seed uint64) (RestudyWorkload, error) {
	if sh.K <= 0 || sh.Threads <= 0 {
		return nil, fmt.Errorf("%w: mri-q %+v", ErrConfig, sh)
	}
	a, rng, err := newRSApp("mriq", s, seed, 0x31a)
	if err != nil {
		return nil, err
	}
	re, im, mag := make([]uint32, sh.K), make([]uint32, sh.K), make([]uint32, sh.K)
	for i := range sh.K {
		r, m := float32(rng.Float64()*2-1), float32(rng.Float64()*2-1)
		re[i], im[i] = math.Float32bits(r), math.Float32bits(m)
		mag[i] = math.Float32bits(phiMag(r, m))
	}
	a.arrays = []rsArray{{name: "phir", init: re}, {name: "phii", init: im}, {name: "phimag", want: mag}}
	a.rs.kernels = []rsKernel{
		perItem("phimag", "mri-q1", sh.K, sh.Threads, func(t *scope.Thread, p *Persister, i int) {
			r := math.Float32frombits(t.Load32(word32(a.addr("phir"), i)))
			m := math.Float32frombits(t.Load32(word32(a.addr("phii"), i)))
			// The index (a multiply-add), its bound check, a multiply
			// and a multiply-add: 4.
			work(t, 4)
			p.Store32(word32(a.addr("phimag"), i), math.Float32bits(phiMag(r, m)))
		}),
	}
	return a, nil
}

// phiMag is ComputePhiMag's real² + imag² in float32, each product rounded
// to float32 as the explicit conversions make Go do on every platform.
func phiMag(r, m float32) float32 { return float32(r*r) + float32(m*m) }
