package benchkit

import (
	"strings"
	"testing"
)

func TestGroup(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v    float64
		prec int
		want string
	}{
		{0, 0, "0"}, {999, 0, "999"}, {1000, 0, "1,000"}, {1499812.4, 0, "1,499,812"},
		{-12345.678, 1, "-12,345.7"}, {100000, 2, "100,000.00"},
	} {
		if got := Group(tc.v, tc.prec); got != tc.want {
			t.Errorf("Group(%v, %d) = %q, want %q", tc.v, tc.prec, got, tc.want)
		}
	}
}

func TestWriteColumns(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	WriteColumns(&b, [][]string{{"", "a", "b"}, {"longer name", "1", "12,345"}, {"x", "RSS ≤", ""}})
	want := "                 a       b\n" +
		"longer name      1  12,345\n" +
		"x            RSS ≤\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
