package app

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
)

// authWebhookBackoff retries TokenReviews and SubjectAccessReviews that
// failed to reach the API server, as kube-apiserver's delegated auth does.
var authWebhookBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// openPaths are served to anyone: the kubelet probes them without a token.
var openPaths = map[string]bool{"/healthz": true, "/livez": true, "/readyz": true}

// withDelegatedAuth protects every path but the probes: the request's bearer
// token must pass a TokenReview (else 401) and its user must be allowed the
// HTTP verb on the non-resource URL by a SubjectAccessReview (else 403).
// Both answers are cached briefly, so a scrape every few seconds costs the
// API server little. This is what kube-controller-manager's secure serving
// and controller-runtime's metrics filters do.
func withDelegatedAuth(h http.Handler, cfg *rest.Config) (http.Handler, error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the client for delegated authentication: %w", err)
	}
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		TokenAccessReviewClient:  client.AuthenticationV1(),
		TokenAccessReviewTimeout: 10 * time.Second,
		WebhookRetryBackoff:      &authWebhookBackoff,
		CacheTTL:                 time.Minute,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("building the delegated authenticator: %w", err)
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: client.AuthorizationV1(),
		AllowCacheTTL:             10 * time.Second,
		DenyCacheTTL:              10 * time.Second,
		WebhookRetryBackoff:       &authWebhookBackoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("building the delegated authorizer: %w", err)
	}

	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if openPaths[req.URL.Path] {
			h.ServeHTTP(w, req)
			return
		}
		logger := klog.FromContext(req.Context())
		res, ok, err := authn.AuthenticateRequest(req)
		if err != nil || !ok {
			if err != nil {
				logger.V(4).Info("Authentication failed", "path", req.URL.Path, "err", err)
			}
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		attrs := authorizer.AttributesRecord{
			User: res.User, Verb: strings.ToLower(req.Method), Path: req.URL.Path, ResourceRequest: false,
		}
		decision, reason, err := authz.Authorize(req.Context(), attrs)
		if err != nil || decision != authorizer.DecisionAllow {
			logger.V(4).Info("Authorization denied", "user", res.User.GetName(), "path", req.URL.Path, "reason", reason, "err", err)
			http.Error(w, fmt.Sprintf("Forbidden: user %q may not %s %s", res.User.GetName(), attrs.Verb, req.URL.Path), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, req)
	}), nil
}

// tlsConfig loads the serving certificate from the flags, or generates a
// self-signed one in memory when none is given (clients such as Prometheus
// in a cluster then skip verification, as they do for kube-controller-manager).
func tlsConfig(o options.GenericOptions) (*tls.Config, error) {
	var cert tls.Certificate
	var err error
	if o.TLSCertFile != "" {
		cert, err = tls.LoadX509KeyPair(o.TLSCertFile, o.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("loading --tls-cert-file/--tls-private-key-file: %w", err)
		}
	} else {
		certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("controller-manager", nil, []string{"localhost"})
		if err != nil {
			return nil, fmt.Errorf("generating a self-signed serving certificate: %w", err)
		}
		if cert, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
			return nil, err
		}
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}
