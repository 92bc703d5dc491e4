/*
Copyright The NDSL controller-manager Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"

	"k8s.io/klog/v2"
)

// maxReviewBytes bounds a review's body: an AdmissionReview carries the
// object and the old object (3 MiB each at most), a ConversionReview a
// whole page of a list.
const maxReviewBytes = 32 << 20

// badRequest is an error the caller made; it is answered with 400.
type badRequest struct{ err error }

func (e badRequest) Error() string { return e.err.Error() }

// readReview checks the method and content type and reads the body.
func readReview(w http.ResponseWriter, req *http.Request) ([]byte, int, error) {
	if req.Method != http.MethodPost {
		return nil, http.StatusMethodNotAllowed, fmt.Errorf("method %s not allowed, only POST", req.Method)
	}
	if ct, _, err := mime.ParseMediaType(req.Header.Get("Content-Type")); err != nil || ct != "application/json" {
		return nil, http.StatusUnsupportedMediaType, fmt.Errorf("content type %q not supported, only application/json", req.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxReviewBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("request body larger than %d bytes", maxReviewBytes)
		}
		return nil, http.StatusBadRequest, fmt.Errorf("reading the request body: %w", err)
	}
	if len(body) == 0 {
		return nil, http.StatusBadRequest, errors.New("empty request body")
	}
	return body, http.StatusOK, nil
}

// writeJSON answers 200 with v as JSON.
func writeJSON(w http.ResponseWriter, v any) int {
	data, err := json.Marshal(v)
	if err != nil {
		http.Error(w, fmt.Sprintf("encoding the response: %v", err), http.StatusInternalServerError)
		return http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(data)
	return http.StatusOK
}

// writeError answers code with msg as plain text and logs why.
func writeError(w http.ResponseWriter, req *http.Request, webhook string, code int, err error) int {
	klog.FromContext(req.Context()).V(2).Info("Rejected malformed webhook request", "webhook", webhook, "code", code, "err", err)
	http.Error(w, err.Error(), code)
	return code
}

// observe records one request's metrics.
func observe(webhook string, code int, start time.Time) {
	requestsTotal.WithLabelValues(webhook, strconv.Itoa(code)).Inc()
	if code >= http.StatusInternalServerError {
		errorsTotal.WithLabelValues(webhook).Inc()
	}
	requestDuration.WithLabelValues(webhook).Observe(time.Since(start).Seconds())
}
