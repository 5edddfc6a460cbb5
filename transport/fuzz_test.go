package transport

import (
	"encoding/json"
	"math/big"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/conclave-ai/conclave/messages"
)

// Fuzz targets for everything the server decodes from clients. Their seed
// corpora (below and in testdata/fuzz/<Name>/) run as ordinary tests; run
// one for real with
//
//	go test ./transport -run '^$' -fuzz FuzzParseCursor -fuzztime 45s

var maxUint64 = new(big.Int).SetUint64(^uint64(0))

func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{
		"", "0", "1", "42", "007", "18446744073709551615", "18446744073709551616", "99999999999999999999",
		"00000000000000000001", "000000000000000000001", "-1", "+1", "1e3", "0x10", " 1", "1 ", "1\n", "１", "٣",
		"1.0", "\x00", strings.Repeat("9", 21), strings.Repeat("0", 20), strings.Repeat("1", 1000),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseCursor(s)
		allDigits := len(s) > 0
		for i := 0; i < len(s); i++ {
			if s[i] < '0' || s[i] > '9' {
				allDigits = false
			}
		}
		if s == "" { // documented: empty means from the start
			if err != nil || n != 0 {
				t.Fatalf("ParseCursor(\"\") = %d, %v; want 0, nil", n, err)
			}
			return
		}
		fits := false
		if allDigits && len(s) <= maxCursorLen {
			v, _ := new(big.Int).SetString(s, 10)
			fits = v.Cmp(maxUint64) <= 0
		}
		if err != nil {
			if fits {
				t.Fatalf("ParseCursor(%q) refused a valid cursor: %v", s, err)
			}
			var aerr *apiError
			if ae, ok := err.(*apiError); ok {
				aerr = ae
			}
			if aerr == nil || aerr.Status != http.StatusBadRequest || aerr.Code != codeInvalidCursor {
				t.Fatalf("ParseCursor(%q) error %v, want a 400 %s", s, err, codeInvalidCursor)
			}
			return
		}
		if !allDigits || len(s) > maxCursorLen {
			t.Fatalf("ParseCursor(%q) = %d, want an error: only 1..20 ASCII digits are cursors", s, n)
		}
		if !fits {
			t.Fatalf("ParseCursor(%q) = %d, but it does not fit a uint64", s, n)
		}
		want := strings.TrimLeft(s, "0")
		if want == "" {
			want = "0"
		}
		if got := strconv.FormatUint(n, 10); got != want {
			t.Fatalf("ParseCursor(%q) = %s, want %s", s, got, want)
		}
	})
}

// checkAPIError checks a decode failure is a client error with a code and a message.
func checkAPIError(t *testing.T, body []byte, err *apiError) {
	t.Helper()
	switch err.Status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
	default:
		t.Fatalf("decoding %q: status %d, want 400, 413 or 415", truncateBytes(body), err.Status)
	}
	if err.Code == "" || err.Message == "" {
		t.Fatalf("decoding %q: error without code or message: %+v", truncateBytes(body), err)
	}
}

func truncateBytes(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

// normalizeStartRun maps the two spellings of an empty fail_nodes /
// panic_nodes list to one: `"fail_nodes": []` decodes to a non-nil empty
// IDs slice, which selects nothing and so is omitted when encoded
// (omitzero), and decodes back as nil. Same meaning, different Go value.
func normalizeStartRun(v *messages.StartRun) {
	if v.Scenario == nil {
		return
	}
	for _, sel := range []*messages.NodeSelector{&v.Scenario.FailNodes, &v.Scenario.PanicNodes} {
		if sel.IDs != nil && len(sel.IDs) == 0 {
			sel.IDs = nil
		}
	}
}

func FuzzDecodeStartRun(f *testing.F) {
	for _, s := range []string{
		`{"question":"q"}`,
		`{"question":"why is the sky blue","session_id":"s-1","hitl":"plan","seed":-7,"concurrency":3,` +
			`"scenario":{"nodes":8,"waves":3,"fan_in":2,"tokens":30,"reasoning_tokens":2,"synthesis_tokens":5,` +
			`"token_delay_ms":1,"tools_per_node":1,"subagents_per_node":2,"fail_nodes":["n001","n007"],` +
			`"panic_nodes":0.25,"panic_attempts":2,"seed":42}}`,
		`{"question":"q","scenario":{"fail_nodes":0.05,"panic_nodes":["n002"]}}`,
		`{"question":"q","hitl":"node","approval_timeout_seconds":60,"approval_timeout_action":"reject"}`,
		`{"question":"q","approval_timeout_action":"maybe","approval_timeout_seconds":-1}`,
		`{"question":"q","scenario":{"fail_nodes":[]}}`,
		`{"question":"q","scenario":{"fail_nodes":null,"panic_nodes":[null]}}`,
		`{"question":"q","scenario":{"fail_nodes":"n001"}}`,
		`{"question":"q","scenario":{"fail_nodes":1e400}}`,
		`{"question":"q","scenario":{"fail_nodes":-0}}`,
		`{"question":"q","scenario":null,"seed":null,"hitl":null}`,
		`{"question":"q","hitl":""}`,
		`{"question":"q","hitl":"always"}`,
		`{"question":"q","hitl":7}`,
		`{"question":"q","colour":"red"}`,
		`{"question":"q","scenario":{"nodez":3}}`,
		`{"question":"q","scenario":{"nodes":3,"extra":{"deep":[1,2,{"x":null}]}}}`,
		`{"QUESTION":"q","Scenario":{"NODES":2}}`,
		`{"question":"a","question":"b"}`,
		`{"question":7}`,
		`{"question":"q","concurrency":"8"}`,
		`{"question":"q","concurrency":1.5}`,
		`{"question":"q","concurrency":99999999999999999999999}`,
		`{"question":"q","seed":9223372036854775808}`,
		`{"question":"q","scenario":{"nodes":-4}}`,
		`{"question":"q"} {}`,
		`{"question":"q"}]`,
		`{"question":"q"}` + "\n\t ",
		`{"question":"\ud800\udc00 \u0000 \"esc\""}`,
		"{\"question\":\"\xff\xfe\"}",
		``, ` `, `null`, `true`, `"q"`, `[]`, `[{"question":"q"}]`, `{`, `{"question":`, `{"question":"q",}`,
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
		`{"question":"q","scenario":{"fail_nodes":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var v messages.StartRun
		if err := decodeStrict(body, &v); err != nil {
			checkAPIError(t, body, err)
			return
		}
		enc, merr := json.Marshal(v)
		if merr != nil {
			t.Fatalf("decoded %q but cannot encode it: %v", truncateBytes(body), merr)
		}
		var w messages.StartRun
		if err := decodeStrict(enc, &w); err != nil {
			t.Fatalf("decoded %q, encoded %s, which does not decode strictly: %v", truncateBytes(body), enc, err)
		}
		normalizeStartRun(&v)
		normalizeStartRun(&w)
		if !reflect.DeepEqual(v, w) {
			t.Fatalf("round trip changed the value:\n body %q\n enc  %s\n v %+v\n w %+v", truncateBytes(body), enc, v, w)
		}
	})
}

func FuzzDecodeWSClientMessage(f *testing.F) {
	for _, s := range []string{
		`{"type":"subscribe","after":0}`, `{"type":"subscribe","after":18446744073709551615}`,
		`{"type":"subscribe","after":18446744073709551616}`, `{"type":"subscribe","after":-1}`,
		`{"type":"subscribe","after":1.5}`, `{"type":"subscribe","after":"3"}`, `{"type":"subscribe"}`,
		`{"type":"nope"}`, `{"type":null,"after":null}`, `{"after":1}`, `{"type":"subscribe","after":1,"x":2}`,
		`{"TYPE":"subscribe","After":2}`, `null`, `[]`, `"subscribe"`, `{`, ``, `{"type":"subscribe"} {"type":"nope"}`,
		`{"type":"subscribe","after":1e2}`, "{\"type\":\"sub\xffscribe\"}",
		`{"type":"resume","request_id":"r1","interrupt_id":"i-1","decision":"approve","feedback":"ok"}`,
		`{"type":"resume","interrupt_id":"i-1","decision":"maybe","response":7}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseWSFrame(data)
		if err != nil {
			return
		}
		// What was accepted survives a round trip.
		enc, merr := json.Marshal(m)
		if merr != nil {
			t.Fatal(merr)
		}
		m2, err := parseWSFrame(enc)
		if err != nil || !reflect.DeepEqual(m2, m) {
			t.Fatalf("frame %q decoded to %+v, re-encoded %s decodes to %+v (%v)", data, m, enc, m2, err)
		}
		// Invalid UTF-8 in a frame becomes U+FFFD: the type the server
		// compares and echoes in close reasons is always valid UTF-8.
		if !utf8.ValidString(m.Type) {
			t.Fatalf("frame %q decoded to a type that is not UTF-8: %q", data, m.Type)
		}
	})
}

func FuzzLoadTokensFile(f *testing.F) {
	for _, s := range []string{
		`{"tokens":{"token-aaaaaaaaaaaaaaaa":"acme"}}`,
		`{"tokens":{"short":"acme"}}`,
		`{"tokens":{"token-aaaaaaaaaaaaaaaa":"bad tenant!"}}`,
		`{"tokens":{"token-aaaaaaaaaaaaaaaa":7}}`,
		`{"tokens":{}}`, `{"tokens":null}`, `{}`, `{"tokens":[]}`, `{"tokens":{"a":"b"},"extra":1}`,
		`{"tokens":{"x":"a","x":"b"}}`, `null`, ``, `{"tokens":{"token-aaaaaaaaaaaaaaaa":"acme"}} trailing`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var tf TokensFile
		if err := decodeStrict(body, &tf); err != nil {
			checkAPIError(t, body, err)
			return
		}
		// As LoadTokens does: each pair is added or refused, and an added
		// token authenticates as its tenant.
		var toks Tokens
		for tok, tenant := range tf.Tokens {
			if err := toks.Add(tok, tenant); err != nil {
				continue
			}
			if got, ok := toks.lookup(tok); !ok || got != tenant {
				t.Fatalf("token %q added for %q, looked up as %q %v", tok, tenant, got, ok)
			}
		}
	})
}
