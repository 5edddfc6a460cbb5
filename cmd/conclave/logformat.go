package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/pflag"
)

// logFormatUsage is --log-format's help, shared by the commands that log.
const logFormatUsage = "log format on stderr: text (key=value) or json (one JSON object a line)"

// registerLogFormat adds --log-format to fs, stored in format.
func registerLogFormat(fs *pflag.FlagSet, format *string) {
	fs.StringVar(format, "log-format", "text", logFormatUsage)
}

// logHandler is the handler of --log-level level and --log-format format
// ("" is text) writing to w.
func logHandler(w io.Writer, level, format string) (slog.Handler, error) {
	l, err := parseLevel(level)
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: l}
	switch strings.ToLower(format) {
	case "", "text":
		return slog.NewTextHandler(w, opts), nil
	case "json":
		return slog.NewJSONHandler(w, opts), nil
	}
	return nil, fmt.Errorf("invalid --log-format %q: must be text or json", format)
}
