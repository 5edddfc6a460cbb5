package fanout

import (
	"bytes"
	"time"
)

// A council's events carry no payload stamp: their latency is measured from
// the envelope's own "timestamp", which the session hub sets when it stamps
// the event (messages.Emit.Stamp with the engine's clock, before encoding,
// journaling and fan-out). messages.Envelope.AppendJSON writes it as the
// fourth field, in UTC, as RFC 3339 with nanoseconds whose trailing zeros are
// trimmed (time.RFC3339Nano): "…,"timestamp":"2026-11-21T08:34:41.1234567Z",…".
// Its resolution is therefore the clock's: nanoseconds on Linux.
//
// Clients find it with a byte scan and parse just it; they never decode
// the envelope.

var timestampKey = []byte(`,"timestamp":"`)

// FindTimestamp returns the envelope timestamp of the JSON envelope b in
// unix nanoseconds. It looks for the first "timestamp" key: envelopes put
// it before the payload, so a payload cannot fool it.
func FindTimestamp(b []byte) (int64, bool) {
	i := bytes.Index(b, timestampKey)
	if i < 0 {
		return 0, false
	}
	v := b[i+len(timestampKey):]
	end := bytes.IndexByte(v, '"')
	if end < 0 {
		return 0, false
	}
	return ParseTimestamp(v[:end])
}

// ParseTimestamp parses an RFC 3339 timestamp into unix nanoseconds. The
// form envelopes use (UTC, "Z", 0 to 9 fraction digits) is parsed by hand
// without allocating; any other form (an offset) goes through time.Parse.
func ParseTimestamp(b []byte) (int64, bool) {
	if v, ok := parseUTC(b); ok {
		return v, true
	}
	t, err := time.Parse(time.RFC3339Nano, string(b))
	if err != nil {
		return 0, false
	}
	return t.UnixNano(), true
}

// parseUTC parses "YYYY-MM-DDTHH:MM:SS[.f{1,9}]Z".
func parseUTC(b []byte) (int64, bool) {
	const base = len("2006-01-02T15:04:05")
	if len(b) < base+1 || b[len(b)-1] != 'Z' ||
		b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' {
		return 0, false
	}
	num := func(from, to int) (int, bool) {
		n := 0
		for _, c := range b[from:to] {
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int(c-'0')
		}
		return n, true
	}
	year, ok1 := num(0, 4)
	month, ok2 := num(5, 7)
	day, ok3 := num(8, 10)
	hour, ok4 := num(11, 13)
	minute, ok5 := num(14, 16)
	sec, ok6 := num(17, 19)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || month < 1 || month > 12 || day < 1 || day > daysIn(year, month) ||
		hour > 23 || minute > 59 || sec > 59 {
		return 0, false
	}
	var nsec int64
	if frac := b[base : len(b)-1]; len(frac) > 0 {
		if frac[0] != '.' || len(frac) < 2 || len(frac) > 10 {
			return 0, false
		}
		digits := len(frac) - 1
		f, ok := num(base+1, base+1+digits)
		if !ok {
			return 0, false
		}
		nsec = int64(f)
		for range 9 - digits {
			nsec *= 10
		}
	}
	secs := daysFromCivil(year, month, day)*86400 + int64(hour*3600+minute*60+sec)
	return secs*1e9 + nsec, true
}

// daysFromCivil is the number of days from 1970-01-01 to the given
// proleptic Gregorian date (Howard Hinnant's days_from_civil).
func daysFromCivil(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y
	if era < 0 { // year 0000, January or February
		era -= 399
	}
	era /= 400
	yoe := y - era*400
	mp := (m + 9) % 12 // March = 0
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era*146097 + doe - 719468)
}

func daysIn(year, month int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
