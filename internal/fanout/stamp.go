package fanout

import (
	"bytes"
	"fmt"
)

// Every published event's text carries its send time at the start, as
// "t=<19-digit unix nanoseconds>;" padded with 'x' to the payload size.
// Clients find it by scanning for `"t=` without decoding the JSON around it.
const (
	stampDigits = 19
	// StampLen is the length of the timestamp prefix; payloads are at least this long.
	StampLen = len("t=") + stampDigits + len(";")
	// MaxPayload bounds the payload size.
	MaxPayload = 1 << 20
)

// ValidPayloadSize reports whether size can carry a stamp.
func ValidPayloadSize(size int) error {
	if size < StampLen || size > MaxPayload {
		return fmt.Errorf("fanout: payload must be %d..%d bytes, got %d", StampLen, MaxPayload, size)
	}
	return nil
}

// AppendStamp appends a payload of size bytes (at least StampLen) that
// starts with the timestamp unixNano (which must be >= 0).
func AppendStamp(dst []byte, unixNano int64, size int) []byte {
	dst = append(dst, 't', '=')
	var digits [stampDigits]byte
	v := uint64(unixNano)
	for i := stampDigits - 1; i >= 0; i-- {
		digits[i] = byte('0' + v%10)
		v /= 10
	}
	dst = append(dst, digits[:]...)
	dst = append(dst, ';')
	for i := StampLen; i < size; i++ {
		dst = append(dst, 'x')
	}
	return dst
}

// FindStamp returns the timestamp of the first stamped JSON string in b:
// the first `"t=` followed by 19 digits and ';'. It scans for '=', which
// is rare in an envelope, rather than for the quote, which is everywhere.
func FindStamp(b []byte) (int64, bool) {
	for off := 0; ; {
		i := bytes.IndexByte(b[off:], '=')
		if i < 0 {
			return 0, false
		}
		i += off
		if i >= 2 && b[i-1] == 't' && b[i-2] == '"' {
			if v, ok := parseStamp(b[i-1:]); ok {
				return v, true
			}
		}
		off = i + 1
	}
}

// parseStamp parses "t=<19 digits>;" at the start of b.
func parseStamp(b []byte) (int64, bool) {
	if len(b) < StampLen || b[0] != 't' || b[1] != '=' || b[StampLen-1] != ';' {
		return 0, false
	}
	var v uint64
	for _, c := range b[2 : 2+stampDigits] {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	if v > 1<<63-1 {
		return 0, false
	}
	return int64(v), true
}

var seqKey = []byte(`"seq":`)

// FindSeq returns the value of the first "seq" key of a JSON envelope.
// Envelopes put seq before any payload, so a payload cannot fool it.
func FindSeq(b []byte) (uint64, bool) {
	i := bytes.Index(b, seqKey)
	if i < 0 {
		return 0, false
	}
	return parseUint(b[i+len(seqKey):])
}

// parseUint parses the decimal digits at the start of b (at least one, at
// most 19 so it cannot overflow).
func parseUint(b []byte) (uint64, bool) {
	var v uint64
	n := 0
	for n < len(b) && n < 19 && b[n] >= '0' && b[n] <= '9' {
		v = v*10 + uint64(b[n]-'0')
		n++
	}
	if n == 0 || (n < len(b) && b[n] >= '0' && b[n] <= '9') {
		return 0, false
	}
	return v, true
}
