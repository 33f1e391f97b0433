package framework

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"hostpath.dev/api/managerapi"
)

// ManagerCABundle returns the PEM bundle that callers trust for the
// managers' serving certificates (the ConfigMap the host definer publishes).
func (f *Framework) ManagerCABundle(ctx context.Context) ([]byte, error) {
	cm, err := f.Client.CoreV1().ConfigMaps(SystemNamespace).Get(ctx, managerapi.CABundleConfigMap, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get ConfigMap %s/%s: %w", SystemNamespace, managerapi.CABundleConfigMap, err)
	}
	pem := cm.Data[managerapi.CABundleKey]
	if pem == "" {
		return nil, fmt.Errorf("ConfigMap %s/%s has no %s", SystemNamespace, managerapi.CABundleConfigMap, managerapi.CABundleKey)
	}
	return []byte(pem), nil
}

// ManagerTLS returns the TLS configuration of a careful caller of the
// manager on node: it trusts only the bundle and wants the node's server
// name.
func (f *Framework) ManagerTLS(ctx context.Context, node string) (*tls.Config, error) {
	pem, err := f.ManagerCABundle(ctx)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("the managers' CA bundle holds no certificate")
	}
	return &tls.Config{RootCAs: pool, ServerName: managerapi.ServerName(node), MinVersion: tls.VersionTLS12}, nil
}
