package backend

/*
#include <stdint.h>
#include "ggml_rs.h"

// Declared here, defined by the //export below.
extern void ggmlrsGoLog(int32_t level, char *target, char *message, void *user_data);
*/
import "C"

import (
	"context"
	"log/slog"
	"sync"
	"unsafe"
)

// LevelTrace is below slog.LevelDebug, for the most verbose diagnostics.
const LevelTrace slog.Level = -8

// slogLevel maps a ggml-rs log level (1 debug … 4 error) to slog's.
func slogLevel(level int32) slog.Level {
	switch level {
	case 1:
		return slog.LevelDebug
	case 2:
		return slog.LevelInfo
	case 3:
		return slog.LevelWarn
	case 4:
		return slog.LevelError
	}
	return LevelTrace
}

//export ggmlrsGoLog
func ggmlrsGoLog(level C.int32_t, target *C.char, message *C.char, _ unsafe.Pointer) {
	ctx := context.Background()
	l := slogLevel(int32(level))
	logger := slog.Default()
	if !logger.Enabled(ctx, l) {
		return
	}
	logger.Log(ctx, l, C.GoString(message), "source", C.GoString(target))
}

var logOnce sync.Once

// installLogger routes ggml's and ggml-rs's log records to log/slog (the
// default logger at the time of each record, so slog.SetDefault works
// later). Records at every level are passed; slog's handler filters.
func installLogger() {
	logOnce.Do(func() {
		C.ggml_rs_log_set(C.ggml_rs_log_fn(C.ggmlrsGoLog), nil, 1)
	})
}
