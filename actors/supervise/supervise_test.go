package supervise_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/conclave-ai/conclave/actors/supervise"
	"github.com/conclave-ai/conclave/messages"
)

// fakeSup records what a strategy asks of the supervisor.
type fakeSup struct {
	restarted, stopped []string
}

func (f *fakeSup) Children() []*actor.PID       { return nil }
func (f *fakeSup) EscalateFailure(any, any)     {}
func (f *fakeSup) ResumeChildren(...*actor.PID) {}
func (f *fakeSup) RestartChildren(pids ...*actor.PID) {
	f.restarted = append(f.restarted, ids(pids)...)
}
func (f *fakeSup) StopChildren(pids ...*actor.PID) { f.stopped = append(f.stopped, ids(pids)...) }
func ids(pids []*actor.PID) (out []string) {
	for _, p := range pids {
		out = append(out, p.Id)
	}
	return out
}

// fakeGroup has one policy and fixed siblings.
type fakeGroup struct {
	p        supervise.Policy
	siblings []*actor.PID
	told     []string
}

func (g *fakeGroup) PolicyOf(*actor.PID) supervise.Policy { return g.p }
func (g *fakeGroup) Siblings(*actor.PID) []*actor.PID     { return g.siblings }
func (g *fakeGroup) Restarting(sib, failed *actor.PID, why any) {
	g.told = append(g.told, fmt.Sprint(sib.Id, "<-", failed.Id, ":", why))
}

func pid(id string) *actor.PID { return actor.NewPID("nonhost", id) }

func TestStrategy_HandleFailure(t *testing.T) {
	t.Parallel()
	sys := actor.NewActorSystem()
	t.Cleanup(sys.Shutdown)
	sibs := []*actor.PID{pid("team/m2"), pid("team/m3")}
	for _, tc := range []struct {
		name               string
		p                  supervise.Policy
		failures           int // failures of the child before this one
		restarted, stopped []string
		told               int
	}{
		{"one-for-one restarts the child alone", supervise.Policy{Strategy: messages.SupervisionOneForOne, Limit: 3}, 0, []string{"team/m1"}, nil, 0},
		{"all-for-one restarts the siblings with it", supervise.Policy{Strategy: messages.SupervisionAllForOne, Limit: 3}, 0, []string{"team/m1", "team/m2", "team/m3"}, nil, 2},
		{"stop stops the child", supervise.Policy{Strategy: messages.SupervisionStop, Limit: 3}, 0, nil, []string{"team/m1"}, 0},
		{"past the limit the child stops", supervise.Policy{Strategy: messages.SupervisionAllForOne, Limit: 2, Window: time.Hour}, 2, nil, []string{"team/m1"}, 0},
		{"at the limit it still restarts", supervise.Policy{Strategy: messages.SupervisionOneForOne, Limit: 2, Window: time.Hour}, 1, []string{"team/m1"}, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := &fakeGroup{p: tc.p, siblings: sibs}
			sup := &fakeSup{}
			rs := actor.NewRestartStatistics()
			for range tc.failures {
				rs.Fail()
			}
			supervise.New(func() supervise.Group { return g }).HandleFailure(sys, sup, pid("team/m1"), rs, "boom", nil)
			if !slices.Equal(sup.restarted, tc.restarted) || !slices.Equal(sup.stopped, tc.stopped) {
				t.Errorf("restarted %v stopped %v, want %v and %v", sup.restarted, sup.stopped, tc.restarted, tc.stopped)
			}
			if len(g.told) != tc.told {
				t.Errorf("siblings told %v, want %d", g.told, tc.told)
			}
			if tc.told > 0 && g.told[0] != "team/m2<-team/m1:boom" {
				t.Errorf("told %q", g.told[0])
			}
		})
	}
}

func TestPolicy_With(t *testing.T) {
	t.Parallel()
	d := supervise.Policy{Strategy: messages.SupervisionOneForOne, Limit: 3, Window: time.Minute, Backoff: 100 * time.Millisecond, BackoffMax: 10 * time.Second}
	if got := d.With(nil); got != d {
		t.Errorf("With(nil) = %+v", got)
	}
	got := d.With(&messages.SupervisionPolicy{Strategy: messages.SupervisionAllForOne, RestartLimit: 5, WindowMS: 10_000})
	want := supervise.Policy{Strategy: messages.SupervisionAllForOne, Limit: 5, Window: 10 * time.Second, Backoff: 100 * time.Millisecond, BackoffMax: 10 * time.Second}
	if got != want {
		t.Errorf("With = %+v, want %+v", got, want)
	}
}

func TestPolicy_Wait(t *testing.T) {
	t.Parallel()
	p := supervise.Policy{Backoff: time.Second, BackoffMax: 4 * time.Second}
	if w := p.Wait("k", 0); w != 0 {
		t.Errorf("no failure waited %v", w)
	}
	for f, base := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 6: 4 * time.Second} {
		w := p.Wait("k", f)
		if w < base*8/10 || w >= base*12/10 {
			t.Errorf("failure %d waited %v, want %v ±20%%", f, w, base)
		}
		if w != p.Wait("k", f) {
			t.Errorf("failure %d: the wait is not deterministic", f)
		}
	}
	if w := (supervise.Policy{Backoff: -1}).Wait("k", 3); w != 0 {
		t.Errorf("negative backoff waited %v", w)
	}
}
