package backend

import (
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// cpuinfoFlag is the /proc/cpuinfo flag of each x86 instruction set that
// ggml's CPU backend names in its feature list.
var cpuinfoFlag = map[string]string{
	"SSE3": "pni", "SSSE3": "ssse3", "AVX": "avx", "AVX_VNNI": "avx_vnni", "AVX2": "avx2", "F16C": "f16c",
	"FMA": "fma", "BMI2": "bmi2", "AVX512": "avx512f", "AVX512_VBMI": "avx512vbmi", "AVX512_VNNI": "avx512_vnni",
	"AVX512_BF16": "avx512_bf16", "AMX_INT8": "amx_int8",
}

// TestCPUFeatures: on x86-64 Linux, every instruction set in ggml's list
// is one the kernel says this CPU has (a build for another CPU would have
// died of an illegal instruction before; a garbled list would name
// others), and the list has at least SSE3, which every x86-64 build of
// ggml uses.
func TestCPUFeatures(t *testing.T) {
	got := CPUFeatures()
	t.Logf("CPU features: %s", strings.Join(got, " "))
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		if len(got) == 0 {
			t.Error("no CPU features")
		}
		return
	}
	info, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Fatal(err)
	}
	var flags []string
	for _, line := range strings.Split(string(info), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "flags" {
			flags = strings.Fields(v)
			break
		}
	}
	if !slices.Contains(got, "SSE3") {
		t.Errorf("SSE3 missing from %q", got)
	}
	for _, f := range got {
		if flag, isa := cpuinfoFlag[f]; isa && !slices.Contains(flags, flag) {
			t.Errorf("ggml uses %s, but /proc/cpuinfo has no %q", f, flag)
		}
	}
}
