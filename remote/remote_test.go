package remote_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/remote"
)

type nopAgent struct{}

func (nopAgent) Run(context.Context, remote.Request, func(messages.Payload) error) (remote.Result, error) {
	return remote.Result{}, nil
}
func (nopAgent) Cancel(context.Context, string) error { return nil }

func TestRegistry_Lookup(t *testing.T) {
	t.Parallel()
	var r remote.Registry
	if err := r.Add("a", nopAgent{}, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.Add("down", nil, errors.New("connection refused")); err != nil {
		t.Fatal(err)
	}
	if err := r.Add("a", nopAgent{}, nil); err == nil {
		t.Fatal("a name registered twice")
	}
	if ag, err := r.Lookup("a"); err != nil || ag == nil {
		t.Fatalf("a: %v", err)
	}
	if _, err := r.Lookup("down"); !errors.Is(err, remote.ErrUnavailable) || err.Error() != `remote: agent unavailable: "down": connection refused` {
		t.Fatalf("down: %v", err)
	}
	if _, err := r.Lookup("zz"); !errors.Is(err, remote.ErrUnknownAgent) || fmt.Sprint(r.Names()) != "[a down]" {
		t.Fatalf("zz: %v (names %v)", err, r.Names())
	}
	var none *remote.Registry
	if _, err := none.Lookup("a"); !errors.Is(err, remote.ErrUnknownAgent) {
		t.Fatalf("nil registry: %v", err)
	}
}
