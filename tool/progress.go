package tool

import (
	"context"
	"math"
)

// Progress is one report of how far a running call has got: Progress of
// Total units (Total 0: unknown), with an optional Message for people.
// Progress should grow from one report to the next, as MCP's
// notifications/progress asks.
type Progress struct {
	Progress float64
	Total    float64
	Message  string
}

// ProgressFunc takes a call's progress reports. The engine's is safe for
// concurrent use and never blocks: it coalesces reports (at most one
// tool_call_progress event per call every ProgressInterval; see
// actors.Config) so a chatty tool cannot flood the journal.
type ProgressFunc func(Progress)

type progressKey struct{}

// WithProgress returns ctx carrying f; the engine calls every tool with
// one, which publishes the reports as tool_call_progress events on the
// calling agent's lane.
func WithProgress(ctx context.Context, f ProgressFunc) context.Context {
	return context.WithValue(ctx, progressKey{}, f)
}

// WantsProgress reports whether ctx takes progress reports: an MCP call
// asks its server for notifications/progress only then.
func WantsProgress(ctx context.Context) bool {
	f, _ := ctx.Value(progressKey{}).(ProgressFunc)
	return f != nil
}

// ReportProgress reports, from a tool's Call, how far the call has got:
// progress of total (total 0 or less: unknown), msg optional. It does
// nothing when ctx takes no reports (a tool called outside an engine) or
// when progress or total is not a finite number. Reports end when Call
// returns; later ones are dropped.
func ReportProgress(ctx context.Context, progress, total float64, msg string) {
	f, _ := ctx.Value(progressKey{}).(ProgressFunc)
	if f == nil || !finite(progress) || !finite(total) {
		return
	}
	f(Progress{Progress: progress, Total: max(total, 0), Message: msg})
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
