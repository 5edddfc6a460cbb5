package openai_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/openai"
	"github.com/conclave-ai/conclave/model/openai/openaitest"
	"github.com/conclave-ai/conclave/model/scripted"
)

// benchTokens is the Text chunks of one benchmarked turn.
const benchTokens = 256

// BenchmarkStream measures one streamed turn of benchTokens text chunks,
// per token: the scripted model in-process, and the OpenAI backend against
// a local server over loopback TCP — openaitest (which encodes every chunk
// as it sends it) and a handler writing the same wire bytes prebuilt (so
// the figures are the backend's own: HTTP, SSE decoding, the SDK's JSON
// and our chunk mapping). Client and server share the process: ns/token
// and allocs/token count both sides.
//
//	go test -run '^$' -bench BenchmarkStream -benchtime 2000x ./model/openai
func BenchmarkStream(b *testing.B) {
	words := make([]openaitest.Chunk, 0, benchTokens+2)
	for i := range benchTokens {
		words = append(words, openaitest.TextChunk([]string{"light ", "scatters ", "off ", "air "}[i%4]))
	}
	words = append(words, openaitest.FinishChunk("stop"), openaitest.UsageChunk(100, benchTokens, 0))

	b.Run("scripted", func(b *testing.B) {
		m, err := scripted.New(messages.Scenario{Nodes: 1, Tokens: benchTokens})
		if err != nil {
			b.Fatal(err)
		}
		req := model.Request{Role: model.RoleWorker, AgentID: "n001", Turn: 1, Attempt: 1, Goal: "g", Question: "q"}
		runStreamBench(b, m, req)
	})
	b.Run("openai/openaitest", func(b *testing.B) {
		srv := openaitest.NewServer(b, openaitest.Config{})
		for range b.N + 1 {
			srv.Enqueue(openaitest.Reply{Chunks: words})
		}
		runStreamBench(b, benchModel(b, srv.URL), workerReq())
	})
	b.Run("openai/prebuilt", func(b *testing.B) {
		var body []byte
		for _, c := range words {
			c.ID, c.Model = "chatcmpl-bench", "bench"
			js, err := json.Marshal(c)
			if err != nil {
				b.Fatal(err)
			}
			body = append(append(append(body, "data: "...), js...), "\n\n"...)
		}
		body = append(body, "data: [DONE]\n\n"...)
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write(body)
		}))
		b.Cleanup(ts.Close)
		runStreamBench(b, benchModel(b, ts.URL+"/v1"), workerReq())
	})
}

func benchModel(b *testing.B, url string) *openai.Model {
	tr := &http.Transport{}
	b.Cleanup(tr.CloseIdleConnections)
	m, err := openai.New(openai.Config{BaseURL: url, Model: "bench", HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// runStreamBench streams b.N turns and reports ns/token and allocs/token.
func runStreamBench(b *testing.B, m model.Model, req model.Request) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	tokens := 0
	for range b.N {
		st, err := m.Stream(b.Context(), req)
		if err != nil {
			b.Fatal(err)
		}
		for {
			c, err := st.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			if _, ok := c.(*model.Text); ok {
				tokens++
			}
		}
		_ = st.Close()
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	if tokens != b.N*benchTokens {
		b.Fatalf("%d tokens, want %d", tokens, b.N*benchTokens)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(tokens), "ns/token")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(tokens), "allocs/token")
}
