package mcp

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Spec says how to reach one MCP server. Exactly one of Command, URL and
// Transport is set.
type Spec struct {
	// Name prefixes the server's tools: tool "search" of server "web" is
	// "web.search". Letters, digits, '_' and '-', at most MaxNameBytes.
	Name string
	// Command runs a stdio server: Command[0] with the arguments after it,
	// started again for every restart.
	Command []string
	// URL is a streamable HTTP server's endpoint (http or https).
	URL string
	// Transport, for servers in the same process (and tests), makes the
	// transport of each connection; it is called again for every restart.
	Transport func() sdk.Transport
	// Env are NAME=VALUE entries added to a stdio server's environment
	// (Config.Env), overriding it: the only way a variable outside
	// DefaultEnvVars reaches the server.
	Env []string
}

// Spec limits.
const (
	// MaxNameBytes bounds a server's name: "NAME.tool" must leave room for
	// the tool's own name within tool.MaxNameBytes.
	MaxNameBytes = 32
	// MaxSpecBytes bounds a spec string, and MaxArgs its words.
	MaxSpecBytes = 8 << 10
	MaxArgs      = 256
)

var serverName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// ErrSpec marks a spec that cannot be parsed.
var ErrSpec = errors.New("mcp: invalid server spec")

// ParseSpec parses "NAME=COMMAND ARGS…" (a stdio server) or
// "NAME=https://…" / "NAME=http://…" (a streamable HTTP server).
//
// A value that starts with http:// or https:// (any case) is a URL; it
// must have a host. Any other value is a command line, split into words
// as a POSIX shell would split a simple command, with no expansion:
//
//   - words are separated by unquoted spaces, tabs and newlines;
//   - inside '…' every character is literal;
//   - inside "…" a backslash escapes '"' and '\' and is literal before any
//     other character;
//   - outside quotes a backslash makes the next character literal;
//   - quotes join what they enclose to the word around them ('a'"b"c is
//     abc), and ” or "" alone is an empty word;
//   - $, `, ~, *, ?, |, ;, &, <, > and the like are ordinary characters:
//     there are no variables, globs, pipes or redirections (the command
//     runs directly, not through a shell).
//
// An unterminated quote or a trailing backslash is an error.
func ParseSpec(s string) (Spec, error) {
	if len(s) > MaxSpecBytes {
		return Spec{}, fmt.Errorf("%w: longer than %d bytes", ErrSpec, MaxSpecBytes)
	}
	name, value, ok := strings.Cut(s, "=")
	if !ok {
		return Spec{}, fmt.Errorf("%w %q: want NAME=COMMAND ARGS… or NAME=https://…", ErrSpec, s)
	}
	if err := checkName(name); err != nil {
		return Spec{}, err
	}
	value = strings.TrimSpace(value)
	lower := strings.ToLower(value)
	if strings.HasPrefix(lower, "http://") || strings.HasPrefix(lower, "https://") {
		u, err := url.Parse(value)
		if err != nil || u.Host == "" || strings.ContainsAny(value, " \t\n") {
			return Spec{}, fmt.Errorf("%w: server %s: %q is not a valid http(s) URL", ErrSpec, name, value)
		}
		return Spec{Name: name, URL: value}, nil
	}
	words, err := SplitCommand(value)
	if err != nil {
		return Spec{}, fmt.Errorf("%w: server %s: %v", ErrSpec, name, err)
	}
	if len(words) == 0 || words[0] == "" {
		return Spec{}, fmt.Errorf("%w: server %s: no command", ErrSpec, name)
	}
	return Spec{Name: name, Command: words}, nil
}

func checkName(name string) error {
	if !serverName.MatchString(name) || len(name) > MaxNameBytes {
		return fmt.Errorf("%w: server name %q must be 1..%d letters, digits, '_' or '-'", ErrSpec, name, MaxNameBytes)
	}
	return nil
}

// check validates a spec built in Go (ParseSpec's are valid).
func (s Spec) check() error {
	if err := checkName(s.Name); err != nil {
		return err
	}
	n := 0
	if len(s.Command) > 0 {
		n++
	}
	if s.URL != "" {
		n++
	}
	if s.Transport != nil {
		n++
	}
	if n != 1 {
		return fmt.Errorf("%w: server %s: set exactly one of Command, URL and Transport", ErrSpec, s.Name)
	}
	if len(s.Env) > 0 && len(s.Command) == 0 {
		return fmt.Errorf("%w: server %s: Env is for stdio servers (Command)", ErrSpec, s.Name)
	}
	return checkEnv(s.Name, s.Env)
}

// String is the spec as ParseSpec reads it (a Transport spec shows as
// "NAME=<transport>").
func (s Spec) String() string {
	switch {
	case s.URL != "":
		return s.Name + "=" + s.URL
	case len(s.Command) > 0:
		return s.Name + "=" + JoinCommand(s.Command)
	}
	return s.Name + "=<transport>"
}

// SplitCommand splits a command line into words by ParseSpec's rules.
func SplitCommand(s string) ([]string, error) {
	var (
		words  []string
		cur    strings.Builder
		inWord bool // cur holds a word, possibly empty ("")
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\\':
			if i+1 == len(s) {
				return nil, errors.New("trailing backslash")
			}
			i++
			cur.WriteByte(s[i])
			inWord = true
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, errors.New("unterminated single quote")
			}
			cur.WriteString(s[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i == len(s) {
				return nil, errors.New("unterminated double quote")
			}
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
		if len(words) > MaxArgs {
			return nil, fmt.Errorf("more than %d words", MaxArgs)
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	if len(words) > MaxArgs {
		return nil, fmt.Errorf("more than %d words", MaxArgs)
	}
	return words, nil
}

// JoinCommand quotes words so that SplitCommand gives them back.
func JoinCommand(words []string) string {
	var b strings.Builder
	for i, w := range words {
		if i > 0 {
			b.WriteByte(' ')
		}
		if w != "" && !strings.ContainsAny(w, " \t\n'\"\\") {
			b.WriteString(w)
			continue
		}
		b.WriteByte('\'')
		b.WriteString(strings.ReplaceAll(w, "'", `'\''`))
		b.WriteByte('\'')
	}
	return b.String()
}
