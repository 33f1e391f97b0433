package certs

import (
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
)

func TestIssued(t *testing.T) {
	cond := func(typ certificatesv1.RequestConditionType) certificatesv1.CertificateSigningRequestCondition {
		return certificatesv1.CertificateSigningRequestCondition{Type: typ, Status: "True", Reason: "R", Message: "M"}
	}
	approved, denied, failed := cond(certificatesv1.CertificateApproved), cond(certificatesv1.CertificateDenied), cond(certificatesv1.CertificateFailed)
	for _, tc := range []struct {
		desc       string
		conditions []certificatesv1.CertificateSigningRequestCondition
		cert       string
		want       string
		wantErr    string
	}{
		{desc: "pending"},
		{desc: "approved, not signed yet", conditions: []certificatesv1.CertificateSigningRequestCondition{approved}},
		{desc: "signed", conditions: []certificatesv1.CertificateSigningRequestCondition{approved}, cert: "PEM", want: "PEM"},
		{desc: "a certificate without approval", cert: "PEM"},
		{desc: "denied", conditions: []certificatesv1.CertificateSigningRequestCondition{denied}, wantErr: `denied, reason "R", message "M"`},
		{desc: "approved, then failed", conditions: []certificatesv1.CertificateSigningRequestCondition{approved, failed}, cert: "PEM", wantErr: `failed, reason "R"`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			req := &certificatesv1.CertificateSigningRequest{Status: certificatesv1.CertificateSigningRequestStatus{Conditions: tc.conditions, Certificate: []byte(tc.cert)}}
			got, err := issued(req)
			if string(got) != tc.want || (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("issued = %q, %v; want %q, an error with %q", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
