package workloads

import (
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/scopedpm/scopedpm/crash"
	"github.com/scopedpm/scopedpm/pm"
	"github.com/scopedpm/scopedpm/scope"
)

func init() {
	register("srad", "SRAD speckle-reducing diffusion (SBRP Table 2): per pixel, noise values persisted and ordered by OFence before the pixel; native recovery",
		func(s Size) crash.Workload { return mustWorkload(NewSRAD(sradConfig(s))) })
	register("srad-nofence", "SRAD without the OFence between a pixel's noise values and the pixel: an intra-thread persistency bug",
		func(s Size) crash.Workload {
			c := sradConfig(s)
			c.SkipFence = true
			return mustWorkload(NewSRAD(c))
		})
}

func sradConfig(s Size) SRADConfig {
	switch s {
	case Tiny:
		return SRADConfig{Rows: 2, Cols: 2, Iterations: 1, Threads: 4, Seed: 1}
	case Quick:
		return SRADConfig{Rows: 128, Cols: 128, Iterations: 2, Threads: 256, Seed: 1} // 64 blocks; at 64x64 SBRP falls behind Epoch on PM-far, the opposite of paper scale
	}
	return SRADConfig{Rows: 512, Cols: 512, Iterations: 2, Threads: 256, Seed: 1} // SBRP Table 2: a 512x512 image
}

// SRADConfig is the shape of an SRAD run.
type SRADConfig struct {
	Rows, Cols int    // image size; one thread per pixel
	Iterations int    // diffusion iterations, each of two steps
	Threads    int    // threads per block
	Seed       uint64 // draws the input image
	// SkipFence removes the OFence that orders a pixel after its noise
	// values (a seeded bug).
	SkipFence bool
}

// Fixed-point SRAD arithmetic: values are Q16 (65536 is 1.0), so every run
// and the Go reference compute bit-identical results.
const (
	sradOne    = 1 << 16
	sradBias   = 1 << 20 // added to a derivative so its word is never 0xFFFFFFFF
	sradEmpty  = 0xFFFFFFFF
	sradNoiseB = 24 // bytes of noise per pixel: (dN,dS), (dW,dE), (c, valid)
)

// SRAD is speckle-reducing anisotropic diffusion (Rodinia's SRAD, SBRP
// Table 2), one thread per pixel. Each iteration has two steps, each a
// launch. Step 1 computes a pixel's noise values from the image: the four
// directional derivatives and the diffusion coefficient c, and persists
// them. Step 2 computes the pixel's new value from its own derivatives and
// the coefficients of itself and its south and east neighbours, and
// persists it into the next image after an OFence. Every iteration writes
// its own image and noise arrays, initially empty.
//
// Recovery is native: a thread whose output pixel is durable is done and
// returns at once; otherwise it recomputes whatever of its noise values is
// missing and then the pixel. The OFence makes this sound: a pixel is only
// durable once its noise values are, and the pixel's north and west
// neighbours still need its coefficient after a crash.
type SRAD struct {
	cfg  SRADConfig
	grid scope.Grid
	in   []uint32 // image 0, Q16

	wantOnce   sync.Once
	wantImages [][]uint32
	wantNoise  [][]byte
}

// NewSRAD returns an SRAD workload with a seeded random input image.
func NewSRAD(cfg SRADConfig) (*SRAD, error) {
	if cfg.Rows <= 0 || cfg.Cols <= 0 || cfg.Iterations <= 0 || cfg.Threads <= 0 {
		return nil, fmt.Errorf("%w: srad %+v", ErrConfig, cfg)
	}
	n := cfg.Rows * cfg.Cols
	s := &SRAD{cfg: cfg, grid: scope.Grid{Blocks: blocksFor(n, cfg.Threads), Threads: cfg.Threads}}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5bad))
	for range n {
		// A speckled image: intensity in [0, 255] mapped to [1, 2).
		s.in = append(s.in, uint32(sradOne+rng.IntN(256)<<8))
	}
	return s, nil
}

// Config returns the workload's configuration.
func (s *SRAD) Config() SRADConfig { return s.cfg }

// Name returns "srad", or "srad(no-ofence)" for the seeded bug.
func (s *SRAD) Name() string {
	if s.cfg.SkipFence {
		return "srad(no-ofence)"
	}
	return "srad"
}

func (s *SRAD) pixels() int { return s.cfg.Rows * s.cfg.Cols }

// neighbours returns the indices of pixel p's north, south, west and east
// neighbours, clamped at the border.
func (s *SRAD) neighbours(p int) (n, so, w, e int) {
	r, c, C := p/s.cfg.Cols, p%s.cfg.Cols, s.cfg.Cols
	n, so, w, e = p, p, p, p
	if r > 0 {
		n = p - C
	}
	if r < s.cfg.Rows-1 {
		so = p + C
	}
	if c > 0 {
		w = p - 1
	}
	if c < C-1 {
		e = p + 1
	}
	return
}

// sradQ0 returns q0², the speckle scale of an image (variance over squared
// mean, the whole image as region of interest), in Q16.
func sradQ0(img []uint32) int64 {
	var sum, sum2 int64
	for _, v := range img {
		sum += int64(v)
		sum2 += int64(v) * int64(v) >> 16
	}
	n := int64(len(img))
	mean := sum / n
	variance := sum2/n - mean*mean>>16
	q := (variance << 16) / max(mean*mean>>16, 1)
	return max(q, 1)
}

// sradNoise is step 1 for one pixel: the derivatives towards its
// neighbours and its diffusion coefficient, all Q16.
func sradNoise(jc, jn, js, jw, je uint32, q0 int64) (dN, dS, dW, dE int32, c uint32) {
	J := int64(jc)
	n, so, w, e := int64(jn)-J, int64(js)-J, int64(jw)-J, int64(je)-J
	g2 := ((n*n + so*so + w*w + e*e) << 16) / (J * J)
	l := ((n + so + w + e) << 16) / J
	num := g2/2 - (l*l>>16)/16
	den := int64(sradOne) + l/4
	qsqr := (num << 16) / max(den*den>>16, 1)
	den2 := ((qsqr - q0) << 16) / max(q0*(sradOne+q0)>>16, 1)
	cc := int64(sradOne)
	if d := sradOne + den2; d > 0 {
		cc = (int64(sradOne) << 16) / d
	}
	cc = min(max(cc, 0), sradOne)
	return int32(n), int32(so), int32(w), int32(e), uint32(cc)
}

// sradUpdate is step 2 for one pixel: J + λ/4·div(c∇J) with λ = 0.5.
func sradUpdate(jc uint32, dN, dS, dW, dE int32, c, cS, cE uint32) uint32 {
	d := (int64(c)*int64(dN) + int64(cS)*int64(dS) + int64(c)*int64(dW) + int64(cE)*int64(dE)) >> 16
	return uint32(int64(jc) + d/8)
}

func sradEncode(dN, dS, dW, dE int32, c uint32) []byte {
	b := make([]byte, sradNoiseB)
	pm.PutLE(b[0:4], uint64(uint32(dN+sradBias)))
	pm.PutLE(b[4:8], uint64(uint32(dS+sradBias)))
	pm.PutLE(b[8:12], uint64(uint32(dW+sradBias)))
	pm.PutLE(b[12:16], uint64(uint32(dE+sradBias)))
	pm.PutLE(b[16:20], uint64(c))
	pm.PutLE(b[20:24], 1)
	return b
}

// sradDecode returns the noise values in b and whether all three words are
// there.
func sradDecode(b []byte) (dN, dS, dW, dE int32, c uint32, ok bool) {
	var u [6]uint32
	ok = true
	for i := range u {
		u[i] = uint32(pm.GetLE(b[4*i : 4*i+4]))
		ok = ok && u[i] != sradEmpty
	}
	return int32(u[0]) - sradBias, int32(u[1]) - sradBias, int32(u[2]) - sradBias, int32(u[3]) - sradBias, u[4], ok
}

// Setup creates srad.img (Iterations+1 images, the first the input, the
// others empty) and srad.noise (Iterations noise arrays, empty).
func (s *SRAD) Setup(m *pm.Machine) error {
	n := s.pixels()
	img, err := createFilled(m, "srad.img", 4*n*(s.cfg.Iterations+1), 0xFF)
	if err != nil {
		return err
	}
	b := make([]byte, 4*n)
	for i, v := range s.in {
		pm.PutLE(b[4*i:4*i+4], uint64(v))
	}
	if err := m.CopyIn(img, b); err != nil {
		return err
	}
	_, err = createFilled(m, "srad.noise", sradNoiseB*n*s.cfg.Iterations, 0xFF)
	return err
}

type sradRegions struct{ img, noise pm.Addr }

func (s *SRAD) regions(m *pm.Machine) (sradRegions, error) {
	b, err := openRegions(m, "srad.img", "srad.noise")
	if err != nil {
		return sradRegions{}, err
	}
	return sradRegions{b[0], b[1]}, nil
}

func (r sradRegions) pixel(n, k, p int) pm.Addr { return r.img.Add(uint64(4 * (k*n + p))) }
func (r sradRegions) noiseAt(n, k, p int) pm.Addr {
	return r.noise.Add(uint64(sradNoiseB * (k*n + p)))
}

// kernels returns the two step kernels of iteration k, given q0² of image
// k, and the word they report inconsistencies in.
func (s *SRAD) kernels(m *pm.Machine, k int, q0 int64) (step1, step2 scope.Kernel, bad errWord, err error) {
	r, err := s.regions(m)
	if err != nil {
		return nil, nil, bad, err
	}
	if k < 0 || k >= s.cfg.Iterations {
		return nil, nil, bad, fmt.Errorf("%w: srad iteration %d of %d", ErrConfig, k, s.cfg.Iterations)
	}
	if bad, err = newErrWord(m); err != nil {
		return nil, nil, bad, err
	}
	n, fence := s.pixels(), !s.cfg.SkipFence
	step1 = func(t *scope.Thread) {
		p := t.ID()
		if p >= n || t.Load32(r.pixel(n, k+1, p)) != sradEmpty {
			return // no pixel, or done: its noise values are durable
		}
		buf := make([]byte, sradNoiseB)
		t.LoadBytes(r.noiseAt(n, k, p), buf)
		if _, _, _, _, _, ok := sradDecode(buf); ok {
			return
		}
		pn, ps, pw, pe := s.neighbours(p)
		var j [5]uint32
		t.Gather32(j[:], r.pixel(n, k, p), r.pixel(n, k, pn), r.pixel(n, k, ps), r.pixel(n, k, pw), r.pixel(n, k, pe))
		jc, jn, js, jw, je := j[0], j[1], j[2], j[3], j[4]
		if jc == sradEmpty || jn == sradEmpty || js == sradEmpty || jw == sradEmpty || je == sradEmpty {
			bad.set(t)
			return
		}
		t.StoreBytes(r.noiseAt(n, k, p), sradEncode(sradNoise(jc, jn, js, jw, je, q0))) // srad: noise
	}
	step2 = func(t *scope.Thread) {
		p := t.ID()
		out := r.pixel(n, k+1, p)
		if p >= n || t.Load32(out) != sradEmpty {
			return
		}
		_, ps, _, pe := s.neighbours(p)
		buf := make([]byte, sradNoiseB)
		t.LoadBytes(r.noiseAt(n, k, p), buf)
		dN, dS, dW, dE, c, ok := sradDecode(buf)
		var c2 [2]uint64
		t.Gather64(c2[:], r.noiseAt(n, k, ps).Add(16), r.noiseAt(n, k, pe).Add(16))
		cS, cE := c2[0], c2[1]
		jc := t.Load32(r.pixel(n, k, p))
		if !ok || cS>>32 != 1 || cE>>32 != 1 || jc == sradEmpty {
			bad.set(t)
			return
		}
		v := sradUpdate(jc, dN, dS, dW, dE, c, uint32(cS), uint32(cE))
		if fence {
			t.OFence() // the noise values before the pixel
		}
		t.Store32(out, v) // srad: pixel
	}
	return step1, step2, bad, nil
}

// image reads image k of machine m; it fails if a pixel is missing.
func (s *SRAD) image(m *pm.Machine, r sradRegions, k int) ([]uint32, error) {
	n := s.pixels()
	w, err := readWords(m, r.pixel(n, k, 0), n, 4)
	if err != nil {
		return nil, err
	}
	out := make([]uint32, n)
	for i, v := range w {
		if v == sradEmpty {
			return nil, fmt.Errorf("%w: srad image %d pixel %d missing", ErrInconsistent, k, i)
		}
		out[i] = uint32(v)
	}
	return out, nil
}

// run runs (or resumes) every iteration.
func (s *SRAD) run(m *pm.Machine) error {
	r, err := s.regions(m)
	if err != nil {
		return err
	}
	for k := range s.cfg.Iterations {
		if _, err := s.image(m, r, k+1); err == nil {
			continue // resumed: every pixel of this iteration is durable
		}
		img, err := s.image(m, r, k)
		if err != nil {
			return err
		}
		step1, step2, bad, err := s.kernels(m, k, sradQ0(img))
		if err != nil {
			return err
		}
		for i, st := range []scope.Kernel{step1, step2} {
			if _, err := scope.Launch(m, s.grid, st, scope.WithName(fmt.Sprintf("srad-step%d", i+1))); err != nil {
				return err
			}
		}
		if err := bad.check(m, fmt.Sprintf("srad iteration %d read missing noise values or pixels", k)); err != nil {
			return err
		}
	}
	return nil
}

// Run runs the iterations.
func (s *SRAD) Run(m *pm.Machine) error { return s.run(m) }

// Recover validates that every durable pixel has its noise values, then
// resumes every iteration from the durable images and noise arrays.
func (s *SRAD) Recover(m *pm.Machine) error {
	r, err := s.regions(m)
	if err != nil {
		return err
	}
	n := s.pixels()
	for k := range s.cfg.Iterations {
		out, err := readWords(m, r.pixel(n, k+1, 0), n, 4)
		if err != nil {
			return err
		}
		buf := make([]byte, sradNoiseB*n)
		if err := m.Memory().Read(r.noiseAt(n, k, 0), buf); err != nil {
			return err
		}
		for p, v := range out {
			if _, _, _, _, _, ok := sradDecode(buf[sradNoiseB*p:]); v != sradEmpty && !ok {
				return fmt.Errorf("%w: srad iteration %d: pixel (%d,%d) is durable without its noise values",
					ErrInconsistent, k, p/s.cfg.Cols, p%s.cfg.Cols)
			}
		}
	}
	return s.run(m)
}

// Want returns the images and noise arrays the iterations produce, computed
// in plain Go: images[k] is image k, noise[k] iteration k's encoded noise.
// The result is shared: do not modify it.
func (s *SRAD) Want() (images [][]uint32, noise [][]byte) {
	s.wantOnce.Do(func() { s.wantImages, s.wantNoise = s.want() })
	return s.wantImages, s.wantNoise
}

func (s *SRAD) want() (images [][]uint32, noise [][]byte) {
	n := s.pixels()
	images = [][]uint32{s.in}
	for k := range s.cfg.Iterations {
		img, q0 := images[k], sradQ0(images[k])
		nz := make([]byte, 0, sradNoiseB*n)
		type nv struct {
			dN, dS, dW, dE int32
			c              uint32
		}
		vals := make([]nv, n)
		for p := range n {
			pn, ps, pw, pe := s.neighbours(p)
			v := &vals[p]
			v.dN, v.dS, v.dW, v.dE, v.c = sradNoise(img[p], img[pn], img[ps], img[pw], img[pe], q0)
			nz = append(nz, sradEncode(v.dN, v.dS, v.dW, v.dE, v.c)...)
		}
		next := make([]uint32, n)
		for p := range n {
			_, ps, _, pe := s.neighbours(p)
			v := vals[p]
			next[p] = sradUpdate(img[p], v.dN, v.dS, v.dW, v.dE, v.c, vals[ps].c, vals[pe].c)
		}
		images, noise = append(images, next), append(noise, nz)
	}
	return images, noise
}

// Check requires every image and noise array to match the Go reference.
func (s *SRAD) Check(m *pm.Machine) error {
	r, err := s.regions(m)
	if err != nil {
		return err
	}
	n := s.pixels()
	images, noise := s.Want()
	for k := 1; k <= s.cfg.Iterations; k++ {
		got, err := readWords(m, r.pixel(n, k, 0), n, 4)
		if err != nil {
			return err
		}
		for p, v := range got {
			if uint32(v) != images[k][p] {
				return fmt.Errorf("srad image %d pixel (%d,%d) = %#x, want %#x", k, p/s.cfg.Cols, p%s.cfg.Cols, v, images[k][p])
			}
		}
		buf := make([]byte, sradNoiseB*n)
		if err := m.Memory().Read(r.noiseAt(n, k-1, 0), buf); err != nil {
			return err
		}
		for p := range n {
			if string(buf[sradNoiseB*p:sradNoiseB*(p+1)]) != string(noise[k-1][sradNoiseB*p:sradNoiseB*(p+1)]) {
				return fmt.Errorf("srad iteration %d noise of pixel (%d,%d) differs from the reference", k-1, p/s.cfg.Cols, p%s.cfg.Cols)
			}
		}
	}
	return nil
}
