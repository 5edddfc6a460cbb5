package journal

import (
	"bytes"
	"errors"
	"testing"

	"github.com/conclave-ai/conclave/messages"
)

func testRecord(t testing.TB, session string, seq uint64, prev uint32, typ, run string, data []byte) (key, value []byte, sum uint32) {
	t.Helper()
	key = eventKey(nil, sessionKey(keyEvent, messagesSession(session)), seq)
	value = make([]byte, recordLen(typ, run, len(data)))
	sum = putRecord(value, key, prev, typ, run, data)
	return key, value, sum
}

func TestRecord_RoundTrip(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		typ, run string
		data     []byte
	}{
		{"text_delta", "r1", []byte(`{"seq":1}`)},
		{"", "", nil},
		{"run_started", "", []byte(`{}`)},
		{string(bytes.Repeat([]byte("t"), 300)), string(bytes.Repeat([]byte("r"), 200)), bytes.Repeat([]byte("x"), 70000)},
	} {
		key, v, sum := testRecord(t, "acme/S1", 42, 0xdeadbeef, c.typ, c.run, c.data)
		r, err := decodeRecord(key, v)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if r.format != valueFormat2 || r.sum != sum || r.prev != 0xdeadbeef || string(r.typ) != c.typ || string(r.run) != c.run || !bytes.Equal(r.data, c.data) {
			t.Fatalf("decoded %+v", r)
		}
	}
}

// TestRecord_EveryBitFlipIsCaught flips each bit of the value and of the
// key: the record must never decode (the key covers session and seq).
func TestRecord_EveryBitFlipIsCaught(t *testing.T) {
	t.Parallel()
	key, v, _ := testRecord(t, "s", 7, 99, "text_delta", "run-1", []byte(`{"seq":7,"payload":"hello"}`))
	for i := range len(v) * 8 {
		bad := bytes.Clone(v)
		bad[i/8] ^= 1 << (i % 8)
		if r, err := decodeRecord(key, bad); err == nil {
			t.Fatalf("value bit %d flipped: decoded %+v", i, r)
		}
	}
	for i := range len(key) * 8 {
		bad := bytes.Clone(key)
		bad[i/8] ^= 1 << (i % 8)
		if _, err := decodeRecord(bad, v); !errors.Is(err, errChecksum) {
			t.Fatalf("key bit %d flipped: %v, want a checksum mismatch", i, err)
		}
	}
	// The same value under another seq or session is not that record.
	other, _, _ := testRecord(t, "s", 8, 99, "x", "y", nil)
	if _, err := decodeRecord(other, v); !errors.Is(err, errChecksum) {
		t.Fatalf("a record moved to seq 8: %v", err)
	}
}

func TestRecord_ChainDiffers(t *testing.T) {
	t.Parallel()
	_, _, a := testRecord(t, "s", 2, 1, "t", "r", []byte("x"))
	_, _, b := testRecord(t, "s", 2, 2, "t", "r", []byte("x"))
	if a == b {
		t.Fatal("the sum does not depend on the previous record's sum")
	}
}

func TestRecord_Format1(t *testing.T) {
	t.Parallel()
	v := []byte{valueFormat1, 10}
	v = append(v, "text_delta"...)
	v = append(v, 2, 'r', '1')
	v = append(v, `{"seq":1}`...)
	r, err := decodeRecord([]byte("any key"), v)
	if err != nil || r.format != valueFormat1 || string(r.typ) != "text_delta" || string(r.run) != "r1" || string(r.data) != `{"seq":1}` {
		t.Fatalf("format 1: %+v, %v", r, err)
	}
	for _, bad := range [][]byte{nil, {}, {valueFormat1}, {valueFormat1, 5, 'a'}, {valueFormat1, 0, 3}, {3, 0, 0}, {valueFormat2, 1, 2, 3}} {
		if r, err := decodeRecord(nil, bad); !errors.Is(err, errBadRecord) && !errors.Is(err, errChecksum) {
			t.Fatalf("decode %x = %+v, %v", bad, r, err)
		}
	}
}

func TestSeal(t *testing.T) {
	t.Parallel()
	key := []byte("mkey")
	v := seal(key, []byte("body"))
	if b, err := unseal(key, v); err != nil || string(b) != "body" {
		t.Fatalf("unseal = %q, %v", b, err)
	}
	for i := range len(v) * 8 {
		bad := bytes.Clone(v)
		bad[i/8] ^= 1 << (i % 8)
		if _, err := unseal(key, bad); err == nil {
			t.Fatalf("bit %d flipped: unsealed", i)
		}
	}
	if _, err := unseal([]byte("other"), v); err == nil {
		t.Fatal("unsealed under another key")
	}
	if _, err := unseal(key, v[:4]); err == nil {
		t.Fatal("unsealed a short value")
	}
}

// FuzzDecodeRecord: decoding never panics, and what decodes as format 2
// encodes back to a value that decodes to the same fields.
func FuzzDecodeRecord(f *testing.F) {
	key, v, _ := testRecord(f, "acme/S1", 1, 0, "text_delta", "r1", []byte(`{"seq":1}`))
	f.Add(key, v)
	f.Add([]byte("k"), []byte{valueFormat1, 1, 't', 1, 'r', '{', '}'})
	f.Add([]byte{}, []byte{valueFormat2, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, key, v []byte) {
		r, err := decodeRecord(key, v)
		if err != nil {
			return
		}
		if r.format == valueFormat2 {
			again := make([]byte, recordLen(string(r.typ), string(r.run), len(r.data)))
			putRecord(again, key, r.prev, string(r.typ), string(r.run), r.data)
			r2, err := decodeRecord(key, again)
			if err != nil || r2.prev != r.prev || !bytes.Equal(r2.typ, r.typ) || !bytes.Equal(r2.run, r.run) || !bytes.Equal(r2.data, r.data) {
				t.Fatalf("decoded %x as %+v; re-encoded %x decodes as %+v, %v", v, r, again, r2, err)
			}
		}
	})
}

func messagesSession(s string) messages.SessionID { return messages.SessionID(s) }
