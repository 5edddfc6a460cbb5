package fanout

import (
	"context"
	"testing"
	"time"
)

// BenchmarkConclavePublish measures one Engine.Publish (a request to the
// engine actor, then a message to the session hub, which stamps, encodes
// and journals the event), with no subscriber: the publisher's ceiling.
func BenchmarkConclavePublish(b *testing.B) {
	ctx := context.Background()
	t, err := startConclave(ctx, ServerConfig{Rate: 1}.withDefaults())
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := t.shutdown(ctx); err != nil {
			b.Error(err)
		}
	}()
	payload := string(AppendStamp(nil, time.Now().UnixNano(), DefaultPayload))
	for b.Loop() {
		if err := t.publish(ctx, payload); err != nil {
			b.Fatal(err)
		}
	}
}
