package trusttest

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"hostpath.dev/api/managerapi"
)

// ConfigMap is a CA bundle ConfigMap: namespace/name holding bundle under
// managerapi.CABundleKey, with the type the API server's answers carry.
func ConfigMap(namespace, name string, bundle []byte) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Data:       map[string]string{managerapi.CABundleKey: string(bundle)},
	}
}
