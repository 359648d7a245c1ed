// Command loadbench measures how fast a model loads from the page cache,
// next to two anchors measured in the same run.
//
// It writes (once) a deterministic llama-shaped GGUF of about 1.2 GiB
// (F16 attention and embedding, Q8_0 feed-forward) into
// .cache/loadbench/, reads it once to warm the page cache, then runs -n
// rounds; each round runs every case once, in turn, so that the machine's
// drifting load hits all cases alike (the medians are printed):
//
//   - sequential read: the whole file into a reused 8 MiB buffer. No page
//     faults, no memory written beyond the cache: the ceiling of reading.
//   - fresh-memory read: the file read (pread, as many readers as the
//     backend has threads, work split by bytes) into newly mapped anonymous
//     memory advised to use huge pages, as the loader's host weight buffers
//     are. The kernel must fault in and zero every destination page: what a
//     loader that copies into fresh memory cannot avoid.
//   - ml.NewBackend + Load with default options (CPU weights may be
//     repacked: on x86 the repacking buffer type takes Q4_0 and IQ4_NL
//     only, so this model loads the same as without repacking there), and
//     NewWithOptions(WithoutRepacking()) + Load (plain CPU buffers). The
//     figure counts NewBackend (GGUF parse, placement, allocation) and Load,
//     not Close; the Load-only figure is printed next to it.
//
// With -q4 the feed-forward and output weights are Q4_0 (a 0.8 GiB file,
// llama-q4.gguf), which x86 CPUs repack into interleaved layouts: the
// default-options Load then measures the repacking path.
//
// Run from go/: `go run ./internal/bench/load` (or `make bench-load` from
// the repository root).
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/ggml-rs/ggml-rs/go/gguf"
	"github.com/ggml-rs/ggml-rs/go/internal/regfile"
	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/backend"
)

const (
	nEmbd   = 2048
	nFF     = 5632
	nVocab  = 32000
	nBlocks = 16
)

func main() {
	q4 := flag.Bool("q4", false, "feed-forward and output in Q4_0 instead of Q8_0 (a smaller model that exercises the repacking buffer type on x86)")
	path := flag.String("model", "", "model path (written when missing; default ../.cache/loadbench/llama-1g.gguf, or llama-q4.gguf with -q4)")
	runs := flag.Int("n", 5, "rounds (each case once per round)")
	threads := flag.Int("t", 0, "NumThreads (0: the backend's default)")
	only := flag.Int("only", -1, "run only this case (0 sequential, 1 fresh-memory read, 2 default load, 3 without repacking), for profiling")
	flag.Parse()
	ffn := gguf.TensorQ8_0
	if *q4 {
		ffn = gguf.TensorQ4_0
	}
	if *path == "" {
		*path = "../.cache/loadbench/llama-1g.gguf"
		if *q4 {
			*path = "../.cache/loadbench/llama-q4.gguf"
		}
	}

	if _, err := os.Stat(*path); err != nil {
		if err := writeModel(*path, ffn); err != nil {
			log.Fatal(err)
		}
	}
	st, err := os.Stat(*path)
	if err != nil {
		log.Fatal(err)
	}
	size := st.Size()
	readers := *threads
	if readers <= 0 {
		readers = backend.DefaultThreads()
	}
	fmt.Printf("model %s: %d bytes (%.2f GiB); %d threads\n", *path, size, float64(size)/(1<<30), readers)

	buf := make([]byte, 8<<20)
	if err := seqRead(*path, buf); err != nil { // warm the page cache
		log.Fatal(err)
	}

	params := ml.BackendParams{AllocMemory: true, NumThreads: *threads}
	// load returns the seconds spent in Load alone.
	load := func(opts ...backend.Option) (float64, error) {
		b, err := backend.NewWithOptions(*path, params, opts...)
		if err != nil {
			return 0, err
		}
		defer b.Close()
		start := time.Now()
		err = b.Load(context.Background(), nil)
		return time.Since(start).Seconds(), err
	}
	cases := []struct {
		name string
		run  func() (float64, error) // seconds of the part after setup, or 0
	}{
		{"sequential read (8 MiB buffer)", func() (float64, error) { return 0, seqRead(*path, buf) }},
		{"read into fresh huge-page memory", func() (float64, error) { return 0, freshRead(*path, size, readers) }},
		{"NewBackend + Load (default, repacking)", func() (float64, error) { return load() }},
		{"NewBackend + Load (WithoutRepacking)", func() (float64, error) { return load(backend.WithoutRepacking()) }},
	}
	gbs := make([][]float64, len(cases))
	loadGBs := make([][]float64, len(cases))
	for r := 0; r < *runs; r++ {
		for i, c := range cases {
			if *only >= 0 && i != *only {
				continue
			}
			start := time.Now()
			part, err := c.run()
			total := time.Since(start).Seconds()
			if err != nil {
				log.Fatalf("%s: %v", c.name, err)
			}
			gbs[i] = append(gbs[i], float64(size)/total/1e9)
			if part > 0 {
				loadGBs[i] = append(loadGBs[i], float64(size)/part/1e9)
			}
		}
	}
	med := make([]float64, len(cases))
	for i, c := range cases {
		if len(gbs[i]) == 0 {
			continue
		}
		med[i] = median(gbs[i])
		fmt.Printf("%-40s median %6.2f GB/s", c.name, med[i])
		if len(loadGBs[i]) > 0 {
			fmt.Printf(" (Load alone %6.2f)", median(loadGBs[i]))
		}
		fmt.Printf("  runs:")
		for _, g := range gbs[i] {
			fmt.Printf(" %.2f", g)
		}
		fmt.Println()
	}
	if *only >= 0 {
		return
	}
	fmt.Printf("ratios to sequential read: fresh-memory read %.2f, load default %.2f, load without repacking %.2f\n",
		med[1]/med[0], med[2]/med[0], med[3]/med[0])
	fmt.Printf("ratios to fresh-memory read: load default %.2f, load without repacking %.2f\n",
		med[2]/med[1], med[3]/med[1])
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func seqRead(path string, buf []byte) error {
	f, err := regfile.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for {
		_, err := f.Read(buf)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// freshRead reads the whole file into newly mapped anonymous memory advised
// to use huge pages, with n readers taking 8 MiB pieces in turn, as a load
// into freshly allocated host weight buffers does.
func freshRead(path string, size int64, n int) error {
	mem, err := syscall.Mmap(-1, 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return err
	}
	defer syscall.Munmap(mem)
	_ = syscall.Madvise(mem, 14) // MADV_HUGEPAGE
	f, err := regfile.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	const piece = 8 << 20
	var (
		mu    sync.Mutex
		next  int64
		first error
		wg    sync.WaitGroup
	)
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				off := next
				next += piece
				stop := first != nil
				mu.Unlock()
				if stop || off >= size {
					return
				}
				end := min(off+piece, size)
				if _, err := f.ReadAt(mem[off:end], off); err != nil {
					mu.Lock()
					first = err
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// rng is a deterministic xorshift64* generator.
type rng uint64

func (r *rng) next() uint64 {
	x := uint64(*r)
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	*r = rng(x)
	return x * 2685821657736338717
}

// f16Data is n small random F16 values (|x| < 0.125).
func f16Data(r *rng, n int) []byte {
	b := make([]byte, 2*n)
	for i := 0; i < n; i += 4 {
		v := r.next()
		for j := 0; j < 4 && i+j < n; j++ {
			h := uint16(v>>(16*j))&0x83ff | 0x2c00 // sign, mantissa; exponent 2^-4
			binary.LittleEndian.PutUint16(b[2*(i+j):], h)
		}
	}
	return b
}

// q4Data is n Q4_0 weights: blocks of a small F16 scale and 32 random
// 4-bit values.
func q4Data(r *rng, n int) []byte {
	blocks := n / 32
	b := make([]byte, 18*blocks)
	for k := 0; k < blocks; k++ {
		o := 18 * k
		binary.LittleEndian.PutUint16(b[o:], gguf.Float16(1.0/1024))
		binary.LittleEndian.PutUint64(b[o+2:], r.next())
		binary.LittleEndian.PutUint64(b[o+10:], r.next())
	}
	return b
}

// q8Data is n Q8_0 weights: blocks of a small F16 scale and 32 random int8.
func q8Data(r *rng, n int) []byte {
	blocks := n / 32
	b := make([]byte, 34*blocks)
	for k := 0; k < blocks; k++ {
		o := 34 * k
		binary.LittleEndian.PutUint16(b[o:], gguf.Float16(1.0/1024))
		for j := 0; j < 32; j += 8 {
			binary.LittleEndian.PutUint64(b[o+2+j:], r.next())
		}
	}
	return b
}

func writeModel(path string, ffn gguf.TensorType) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	fmt.Printf("writing %s ...\n", path)
	b := gguf.NewBuilder()
	for _, kv := range []gguf.KV{
		{Key: "general.architecture", Value: "llama"},
		{Key: "general.name", Value: "loadbench"},
		{Key: "llama.block_count", Value: uint32(nBlocks)},
		{Key: "llama.context_length", Value: uint32(4096)},
		{Key: "llama.embedding_length", Value: uint32(nEmbd)},
		{Key: "llama.feed_forward_length", Value: uint32(nFF)},
		{Key: "llama.attention.head_count", Value: uint32(16)},
		{Key: "llama.attention.head_count_kv", Value: uint32(16)},
		{Key: "llama.attention.layer_norm_rms_epsilon", Value: float32(1e-5)},
	} {
		if err := b.Add(kv.Key, kv.Value); err != nil {
			return err
		}
	}
	r := rng(0x9e3779b97f4a7c15)
	add := func(name string, typ gguf.TensorType, shape ...uint64) error {
		n := 1
		for _, d := range shape {
			n *= int(d)
		}
		var data []byte
		switch typ {
		case gguf.TensorF16:
			data = f16Data(&r, n)
		case gguf.TensorQ8_0:
			data = q8Data(&r, n)
		case gguf.TensorQ4_0:
			data = q4Data(&r, n)
		case gguf.TensorF32:
			data = make([]byte, 4*n)
			for i := 0; i < n; i++ {
				binary.LittleEndian.PutUint32(data[4*i:], 0x3f800000) // 1.0
			}
		}
		return b.AddTensor(name, typ, shape, data)
	}
	type spec struct {
		name  string
		typ   gguf.TensorType
		shape []uint64
	}
	specs := []spec{{"token_embd.weight", gguf.TensorF16, []uint64{nEmbd, nVocab}}}
	for l := 0; l < nBlocks; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		specs = append(specs,
			spec{p + "attn_norm.weight", gguf.TensorF32, []uint64{nEmbd}},
			spec{p + "attn_q.weight", gguf.TensorF16, []uint64{nEmbd, nEmbd}},
			spec{p + "attn_k.weight", gguf.TensorF16, []uint64{nEmbd, nEmbd}},
			spec{p + "attn_v.weight", gguf.TensorF16, []uint64{nEmbd, nEmbd}},
			spec{p + "attn_output.weight", gguf.TensorF16, []uint64{nEmbd, nEmbd}},
			spec{p + "ffn_norm.weight", gguf.TensorF32, []uint64{nEmbd}},
			spec{p + "ffn_gate.weight", ffn, []uint64{nEmbd, nFF}},
			spec{p + "ffn_up.weight", ffn, []uint64{nEmbd, nFF}},
			spec{p + "ffn_down.weight", ffn, []uint64{nFF, nEmbd}},
		)
	}
	specs = append(specs,
		spec{"output_norm.weight", gguf.TensorF32, []uint64{nEmbd}},
		spec{"output.weight", ffn, []uint64{nEmbd, nVocab}},
	)
	for _, s := range specs {
		if err := add(s.name, s.typ, s.shape...); err != nil {
			return err
		}
	}
	return b.WriteFile(path)
}
