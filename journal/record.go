package journal

// The stored forms of events and of the journal's own records, and their
// checksums. Pure functions, no I/O: see record_test.go and the fuzz test.
//
// Event records. The key is keyEvent uvarint(len(session)) session seq (8
// bytes, big endian). The value:
//
//	format 1 (written before checksums):  1 uvarint(len(type)) type uvarint(len(run)) run JSON
//	format 2:                             2 sum(4) prev(4) uvarint(len(type)) type uvarint(len(run)) run JSON
//
// sum is the CRC-32C (Castagnoli) of the key followed by the value from
// prev on: it covers the session key, the seq, the previous record's sum
// and the event. prev chains the records of a session: it is the sum of
// the record stored before this one in the session, or 0 when there is
// none or that record is of format 1 (format 1 has no sum, so a chain
// starts again at the first format-2 record). A record read alone proves
// that it is intact and where it belongs; two consecutive records prove
// that nothing was put between them.
//
// Sealed values. Every other record of the journal (trim and repair state,
// the run catalogue) is a sealed value: a format byte, then the CRC-32C of
// the key followed by the body, then the body.

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
)

const (
	valueFormat1 byte = 1
	valueFormat2 byte = 2

	// record2Header is the fixed part of a format-2 value: format, sum, prev.
	record2Header = 9

	sealedFormat byte = 1
	sealedHeader      = 5 // format, sum
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Errors of the codec. Callers turn them into a *CorruptError naming the
// session and seq.
var (
	errBadRecord = errors.New("malformed record")
	errChecksum  = errors.New("checksum mismatch")
)

// eventRecord is a decoded event value. The slices alias the value.
type eventRecord struct {
	format    byte
	sum, prev uint32 // format 2 only
	typ, run  []byte
	data      []byte
}

// recordLen is the length of the format-2 value of an event.
func recordLen(typ, run string, data int) int {
	return record2Header + uvarintLen(len(typ)) + len(typ) + uvarintLen(len(run)) + len(run) + data
}

// putRecord fills v (of length recordLen) with the format-2 value of an
// event stored under key, chained to prev, and returns its sum.
func putRecord(v, key []byte, prev uint32, typ, run string, data []byte) uint32 {
	v[0] = valueFormat2
	binary.BigEndian.PutUint32(v[5:], prev)
	n := record2Header
	n += binary.PutUvarint(v[n:], uint64(len(typ)))
	n += copy(v[n:], typ)
	n += binary.PutUvarint(v[n:], uint64(len(run)))
	n += copy(v[n:], run)
	copy(v[n:], data)
	sum := crc32.Update(crc32.Update(0, castagnoli, key), castagnoli, v[5:])
	binary.BigEndian.PutUint32(v[1:], sum)
	return sum
}

// decodeRecord decodes the value v stored under key and, for format 2,
// verifies its sum. It never returns a record whose sum does not match.
func decodeRecord(key, v []byte) (eventRecord, error) {
	var r eventRecord
	if len(v) == 0 {
		return r, errBadRecord
	}
	r.format = v[0]
	body := v[1:]
	switch r.format {
	case valueFormat1:
	case valueFormat2:
		if len(v) < record2Header {
			return r, errBadRecord
		}
		r.sum, r.prev = binary.BigEndian.Uint32(v[1:]), binary.BigEndian.Uint32(v[5:])
		if crc32.Update(crc32.Update(0, castagnoli, key), castagnoli, v[5:]) != r.sum {
			return r, errChecksum
		}
		body = v[record2Header:]
	default:
		return r, errBadRecord
	}
	var ok bool
	if r.typ, body, ok = cutUvarintBytes(body); !ok {
		return r, errBadRecord
	}
	if r.run, body, ok = cutUvarintBytes(body); !ok {
		return r, errBadRecord
	}
	r.data = body
	return r, nil
}

// cutUvarintBytes splits a uvarint-length-prefixed byte string off b.
func cutUvarintBytes(b []byte) (s, rest []byte, ok bool) {
	n, w := binary.Uvarint(b)
	if w <= 0 || uint64(len(b)-w) < n {
		return nil, nil, false
	}
	return b[w : w+int(n)], b[w+int(n):], true
}

func appendUvarintBytes(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

func uvarintLen(n int) int {
	l := 1
	for n >= 0x80 {
		n >>= 7
		l++
	}
	return l
}

// seal returns the sealed value of body stored under key.
func seal(key, body []byte) []byte {
	v := make([]byte, sealedHeader+len(body))
	v[0] = sealedFormat
	copy(v[sealedHeader:], body)
	binary.BigEndian.PutUint32(v[1:], crc32.Update(crc32.Update(0, castagnoli, key), castagnoli, body))
	return v
}

// unseal verifies a sealed value stored under key and returns its body
// (aliasing v).
func unseal(key, v []byte) ([]byte, error) {
	if len(v) < sealedHeader || v[0] != sealedFormat {
		return nil, errBadRecord
	}
	body := v[sealedHeader:]
	if crc32.Update(crc32.Update(0, castagnoli, key), castagnoli, body) != binary.BigEndian.Uint32(v[1:]) {
		return nil, errChecksum
	}
	return body, nil
}
