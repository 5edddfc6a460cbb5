package actors

import (
	"context"
	"errors"
	"fmt"
	"mime"

	"github.com/conclave-ai/conclave/messages"
)

// FileFetcher fetches a file a run attaches by URL (StartRun.Files).
// Implementations must be safe for concurrent use, honour ctx, and bound
// their own time.
type FileFetcher interface {
	// FetchFile returns the bytes at url (at most max of them: a longer
	// body is an error) and the media type its server declared ("" for
	// none). An error that is a *messages.FileError keeps its code (a
	// URL the operator does not allow: file_url_not_allowed; too long:
	// file_too_large); any other is reported as file_fetch_failed.
	FetchFile(ctx context.Context, url string, max int64) (data []byte, mediaType string, err error)
}

// fetchFiles checks the request's files (messages.CheckInputFiles) and
// fetches those sent by URL, in order, each bounded by what is left of
// the run's file budget. It runs on the caller's goroutine (StartRun),
// never on an actor's mailbox. It returns a new slice: files is not
// changed. The fetched files keep their URL (where they came from).
func fetchFiles(ctx context.Context, f FileFetcher, files []messages.InputFile) ([]messages.InputFile, error) {
	if err := messages.CheckInputFiles(files); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	if len(files) == 0 {
		return files, nil
	}
	out := make([]messages.InputFile, len(files))
	copy(out, files)
	var total int64
	for _, in := range files {
		total += int64(len(in.Data))
	}
	for i, in := range out {
		if in.URL == "" {
			continue
		}
		fail := func(code messages.FileErrorCode, problem string) error {
			return fmt.Errorf("%w: %w", ErrInvalidRequest, &messages.FileError{Index: i, Code: code, Problem: problem})
		}
		if f == nil {
			return nil, fail(messages.FileURLNotAllowed, "url files are not fetched by this server (conclave serve --allow-file-url)")
		}
		limit := min(int64(messages.MaxFileBytes), messages.MaxRunFilesBytes-total)
		if limit <= 0 {
			return nil, fail(messages.FilesTooLarge, fmt.Sprintf("the files before it already take the run's %d bytes", messages.MaxRunFilesBytes))
		}
		data, mt, err := f.FetchFile(ctx, in.URL, limit)
		if err != nil {
			var fe *messages.FileError
			if errors.As(err, &fe) {
				code := fe.Code
				if code == messages.FileTooLarge && limit < messages.MaxFileBytes {
					code = messages.FilesTooLarge // over what the run has left, not over a file's limit
				}
				return nil, fail(code, fe.Problem)
			}
			return nil, fail(messages.FileFetchFailed, err.Error())
		}
		if int64(len(data)) > limit { // a fetcher that did not keep to max
			return nil, fail(messages.FilesTooLarge, fmt.Sprintf("is over the %d bytes left of the run's files", limit))
		}
		total += int64(len(data))
		if data == nil {
			data = []byte{} // fetched, and empty
		}
		out[i].Data = data
		if in.MediaType == "" && mt != "" {
			if parsed, _, err := mime.ParseMediaType(mt); err == nil && parsed != "application/octet-stream" {
				out[i].MediaType = parsed // else the name's extension tells it
			}
		}
	}
	return out, nil
}
