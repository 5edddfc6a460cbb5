package mcp_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/tool/mcp"
)

func TestParseSpec(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		cmd  []string
		url  string
		fail string // a part of the error; "" for none
	}{
		{in: "fs=npx -y @modelcontextprotocol/server-filesystem /tmp", cmd: []string{"npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp"}},
		{in: "everything=node dist/index.js stdio", cmd: []string{"node", "dist/index.js", "stdio"}},
		{in: "a_b-9=  tool\t--x  ", cmd: []string{"tool", "--x"}},
		{in: `q=cmd 'a b' "c \"d\" \\ \e" f\ g 'it'\''s' "" ''`, cmd: []string{"cmd", "a b", `c "d" \ \e`, "f g", "it's", "", ""}},
		{in: `q=cmd a'b'"c"d`, cmd: []string{"cmd", "abcd"}},
		{in: `q=cmd $HOME ~ * | ; > x`, cmd: []string{"cmd", "$HOME", "~", "*", "|", ";", ">", "x"}},
		{in: "web=https://mcp.example.com/mcp", url: "https://mcp.example.com/mcp"},
		{in: "web=HTTP://127.0.0.1:8080/mcp?x=1", url: "HTTP://127.0.0.1:8080/mcp?x=1"},
		{in: "web=https:///nohost", fail: "not a valid http(s) URL"},
		{in: "nocommand", fail: "want NAME=COMMAND"},
		{in: "=cmd", fail: "server name"},
		{in: "bad.name=cmd", fail: "server name"},
		{in: strings.Repeat("n", mcp.MaxNameBytes+1) + "=cmd", fail: "server name"},
		{in: "x=", fail: "no command"},
		{in: "x=''", fail: "no command"},
		{in: "x=cmd 'open", fail: "unterminated single quote"},
		{in: `x=cmd "open`, fail: "unterminated double quote"},
		{in: `x=cmd \`, fail: "trailing backslash"},
		{in: "x=" + strings.Repeat("a ", mcp.MaxArgs+1), fail: "more than"},
		{in: "x=" + strings.Repeat("a", mcp.MaxSpecBytes), fail: "longer than"},
	} {
		sp, err := mcp.ParseSpec(tc.in)
		if tc.fail != "" {
			if err == nil || !errors.Is(err, mcp.ErrSpec) || !strings.Contains(err.Error(), tc.fail) {
				t.Errorf("ParseSpec(%q) = %+v, %v; want an ErrSpec saying %q", tc.in, sp, err, tc.fail)
			}
			continue
		}
		if err != nil || !slices.Equal(sp.Command, tc.cmd) || sp.URL != tc.url {
			t.Errorf("ParseSpec(%q) = %q %q, %v; want %q %q", tc.in, sp.Command, sp.URL, err, tc.cmd, tc.url)
			continue
		}
		// String gives back a spec that parses to the same.
		again, err := mcp.ParseSpec(sp.String())
		if err != nil || !slices.Equal(again.Command, sp.Command) || again.URL != sp.URL || again.Name != sp.Name {
			t.Errorf("ParseSpec(%q.String() = %q) = %+v, %v", tc.in, sp.String(), again, err)
		}
	}
}
