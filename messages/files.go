package messages

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Files attached to a run (StartRun.Files): what a request may attach,
// how it is checked, and what run_started records (RunFile).
//
// Where the bytes live: inline in run_started. The files are capped
// (MaxRunFilesBytes in all), run_started is the record recovery and rewind
// already read the run's settings from, and it is journaled (fsynced)
// before the run is answered as started: so a run rebuilt after a kill -9
// gives its agents the same bytes, with nothing else to keep, garbage
// collect or lose (no blob store whose writes could race the journal's),
// and retention removes them with the run's events. A URL is fetched once,
// before run_started: a restart does not fetch it again, so the agents
// see what the run started with, not what the URL serves later.

// Bounds of a run's attached files; data counts decoded bytes.
// MaxRunFilesBytes is what run_started can carry and still be one message
// of the cluster journal at NATS's default max payload (1 MiB): 640 KiB
// is 853 KiB in base64, leaving room for the question and the options;
// it is also what fits, inline, the server's default 1 MiB request body.
const (
	MaxFiles         = 8
	MaxFileBytes     = 512 << 10
	MaxRunFilesBytes = 640 << 10
	MaxFileNameBytes = 255
)

// InputFile is a file a run starts with: its bytes inline (Data, base64
// in JSON) or a URL the server fetches before the run starts (only from
// the prefixes its operator allows: conclave serve --allow-file-url).
// MediaType may be left out: it is then told by the name's extension.
type InputFile struct {
	Name      string `json:"name"`
	MediaType string `json:"media_type,omitempty"`
	Data      []byte `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

// RunFile is an attached file as its run has it (RunStartedPayload.Files):
// checked, with its bytes.
type RunFile struct {
	Name      string `json:"name"`
	MediaType string `json:"media_type"`
	Size      int64  `json:"size"`
	// SHA256 is the hex SHA-256 of Data.
	SHA256 string `json:"sha256"`
	// URL is where the server fetched it from (absent: sent inline).
	URL  string `json:"url,omitempty"`
	Data []byte `json:"data"`
}

// FileKind is how an attached file reaches a model.
type FileKind int

// File kinds.
const (
	// FileText is UTF-8 text (text/*, JSON): put in the agents' context.
	FileText FileKind = iota + 1
	// FileImage is a PNG, JPEG, GIF or WebP image: a model content part
	// (image_url) where the backend accepts images.
	FileImage
	// FilePDF is a PDF: a model content part (file) where the backend
	// accepts PDFs; its text is not extracted here.
	FilePDF
)

// Kind is how f reaches a model (its media type was checked).
func (f RunFile) Kind() FileKind { return kindOf(f.MediaType) }

// DataURL is f as a data: URL (what a model's content part carries).
func (f RunFile) DataURL() string { return dataURL(f.MediaType, f.Data) }

// FileErrorCode says why an attached file is refused (FileError.Code); it
// is the API error's code.
type FileErrorCode string

// File error codes. The *TooLarge ones are answered 413, the others 422.
const (
	FileTooLarge        FileErrorCode = "file_too_large"
	FilesTooLarge       FileErrorCode = "files_too_large"
	FileInvalid         FileErrorCode = "file_invalid"
	FileURLNotAllowed   FileErrorCode = "file_url_not_allowed"
	FileFetchFailed     FileErrorCode = "file_fetch_failed"
	FileUnsupportedType FileErrorCode = "file_unsupported_type"
)

// FileError refuses an attached file: files[Index] (-1: the whole list).
type FileError struct {
	Index   int
	Code    FileErrorCode
	Problem string
}

func (e *FileError) Error() string {
	if e.Index < 0 {
		return "files: " + e.Problem
	}
	return fmt.Sprintf("files[%d]: %s", e.Index, e.Problem)
}

// TooLarge reports whether the refusal is about size (HTTP 413).
func (e *FileError) TooLarge() bool { return e.Code == FileTooLarge || e.Code == FilesTooLarge }

// CheckInputFiles checks what can be checked of files before any URL is
// fetched: how many, their names, data or url (one of them), the URLs'
// form and the inline data's size. StartRun.Options checks the rest.
func CheckInputFiles(files []InputFile) error {
	if len(files) > MaxFiles {
		return &FileError{Index: -1, Code: FilesTooLarge, Problem: fmt.Sprintf("a run takes at most %d files, got %d", MaxFiles, len(files))}
	}
	var total int64
	for i, f := range files {
		bad := func(code FileErrorCode, format string, args ...any) error {
			return &FileError{Index: i, Code: code, Problem: fmt.Sprintf(format, args...)}
		}
		if err := checkFileName(f.Name); err != "" {
			return bad(FileInvalid, "name %s", err)
		}
		switch {
		case f.Data == nil && f.URL == "":
			return bad(FileInvalid, "needs data or url")
		case f.Data != nil && f.URL != "":
			return bad(FileInvalid, "has both data and url; send one")
		case f.URL != "":
			if _, err := ParseFileURL(f.URL); err != nil {
				return bad(FileInvalid, "%v", err)
			}
			continue
		}
		if len(f.Data) > MaxFileBytes {
			return bad(FileTooLarge, "is %d bytes, over the %d-byte limit of a file", len(f.Data), MaxFileBytes)
		}
		if total += int64(len(f.Data)); total > MaxRunFilesBytes {
			return bad(FilesTooLarge, "brings the run's files to over %d bytes", MaxRunFilesBytes)
		}
	}
	return nil
}

// ParseFileURL parses an attached file's URL: absolute http or https,
// without credentials.
func ParseFileURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil || len(raw) > 2048:
		return nil, fmt.Errorf("url %q is not a URL of at most 2048 bytes", truncate(raw, 64))
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return nil, fmt.Errorf("url %q is not an absolute http or https URL", truncate(raw, 64))
	case u.User != nil:
		return nil, fmt.Errorf("url %q carries credentials", truncate(u.Redacted(), 64))
	}
	return u, nil
}

// runFiles checks files, whose URLs the engine has fetched (Data set, URL
// kept as where it came from), and returns them as the run has them. The
// engine checks the request's files with CheckInputFiles first, before
// it fetches: a URL file with data is refused there.
func runFiles(files []InputFile) ([]RunFile, error) {
	if len(files) == 0 {
		return nil, nil
	}
	if len(files) > MaxFiles {
		return nil, &FileError{Index: -1, Code: FilesTooLarge, Problem: fmt.Sprintf("a run takes at most %d files, got %d", MaxFiles, len(files))}
	}
	out := make([]RunFile, 0, len(files))
	var total int64
	for i, f := range files {
		bad := func(code FileErrorCode, format string, args ...any) ([]RunFile, error) {
			return nil, &FileError{Index: i, Code: code, Problem: fmt.Sprintf(format, args...)}
		}
		if err := checkFileName(f.Name); err != "" {
			return bad(FileInvalid, "name %s", err)
		}
		if f.Data == nil {
			if f.URL != "" {
				return bad(FileURLNotAllowed, "url files are not fetched by this server (conclave serve --allow-file-url)")
			}
			return bad(FileInvalid, "needs data or url")
		}
		if len(f.Data) > MaxFileBytes {
			return bad(FileTooLarge, "is %d bytes, over the %d-byte limit of a file", len(f.Data), MaxFileBytes)
		}
		if total += int64(len(f.Data)); total > MaxRunFilesBytes {
			return bad(FilesTooLarge, "brings the run's files to over %d bytes", MaxRunFilesBytes)
		}
		mt, problem := fileMediaType(f)
		if problem != "" {
			return bad(FileUnsupportedType, "%s", problem)
		}
		if problem := checkContent(mt, f.Data); problem != "" {
			return bad(FileInvalid, "%s", problem)
		}
		sum := sha256.Sum256(f.Data)
		out = append(out, RunFile{Name: f.Name, MediaType: mt, Size: int64(len(f.Data)), SHA256: hex.EncodeToString(sum[:]), URL: f.URL, Data: f.Data})
	}
	return out, nil
}

func checkFileName(name string) string {
	switch {
	case name == "":
		return "is required"
	case len(name) > MaxFileNameBytes:
		return fmt.Sprintf("is longer than %d bytes", MaxFileNameBytes)
	case !utf8.ValidString(name):
		return "is not UTF-8"
	case strings.ContainsFunc(name, unicode.IsControl):
		return "has control characters"
	}
	return ""
}

// byExtension tells a media type left out from the name's extension.
var byExtension = map[string]string{
	".txt": "text/plain", ".md": "text/markdown", ".markdown": "text/markdown", ".csv": "text/csv",
	".html": "text/html", ".htm": "text/html", ".xml": "text/xml", ".json": "application/json",
	".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp",
	".pdf": "application/pdf",
}

// fileMediaType is f's media type, normalised (lowercase, without
// parameters), or why it is refused.
func fileMediaType(f InputFile) (string, string) {
	raw := f.MediaType
	if raw == "" {
		raw = byExtension[strings.ToLower(path.Ext(f.Name))]
		if raw == "" {
			return "", fmt.Sprintf("has no media_type, and its name's extension %q tells none", truncate(path.Ext(f.Name), 16))
		}
	}
	mt, _, err := mime.ParseMediaType(raw)
	if err != nil {
		return "", fmt.Sprintf("media_type %q is not a media type", truncate(raw, 64))
	}
	if kindOf(mt) == 0 {
		return "", fmt.Sprintf("media_type %s is not one a run takes (text/*, application/json, image/png, image/jpeg, image/gif, image/webp, application/pdf)", truncate(mt, 64))
	}
	return mt, ""
}

func kindOf(mt string) FileKind {
	switch {
	case strings.HasPrefix(mt, "text/"), mt == "application/json":
		return FileText
	case mt == "image/png", mt == "image/jpeg", mt == "image/gif", mt == "image/webp":
		return FileImage
	case mt == "application/pdf":
		return FilePDF
	}
	return 0
}

// checkContent checks that data is what mt says: UTF-8 text, or an image
// or PDF whose bytes a sniffer (http.DetectContentType) names the same
// (a model's server refuses an image whose bytes are not its type).
func checkContent(mt string, data []byte) string {
	switch kindOf(mt) {
	case FileText:
		if !utf8.Valid(data) {
			return "is not UTF-8 text, as its media type " + mt + " says"
		}
	default:
		if got, _, _ := strings.Cut(http.DetectContentType(data), ";"); got != mt {
			return fmt.Sprintf("has the bytes of %s, not of its media type %s", got, mt)
		}
	}
	return ""
}

func dataURL(mt string, data []byte) string {
	return "data:" + mt + ";base64," + base64.StdEncoding.EncodeToString(data)
}
