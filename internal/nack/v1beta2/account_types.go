package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AccountSpec is NACK's Account spec, every field its published CRD (deploy/crds.yml)
// holds. In NACK an Account is connection configuration, not a NATS account: the
// servers and the credentials its Streams (spec.account, same namespace) are made with;
// NACK's own server list is used when servers is empty. Eva renders name and creds
// (the Secret of the tenant's workloads' credentials); the other fields exist so that
// the CRD keeps them, as NACK's does, for the admission policy eva-tenant-nack-accounts
// to refuse.
type AccountSpec struct {
	// name of the account.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:Pattern=`^[^.*>]*$`
	// +optional
	Name string `json:"name,omitempty"`
	// creds are the credentials to connect with.
	// +optional
	Creds *AccountCreds `json:"creds,omitempty"`
	// nkey is an NKey seed to connect with.
	// +optional
	NKey *AccountNKey `json:"nkey,omitempty"`
	// servers to connect to.
	// +kubebuilder:validation:items:MinLength=1
	// +optional
	Servers []string `json:"servers,omitempty"`
	// tls are the client certificates to connect with.
	// +optional
	TLS *AccountTLS `json:"tls,omitempty"`
	// token is a token to connect with.
	// +optional
	Token *AccountToken `json:"token,omitempty"`
	// user is a user and password to connect with.
	// +optional
	User *AccountUser `json:"user,omitempty"`
	// tlsFirst starts TLS before the server's INFO.
	// +kubebuilder:default=false
	// +optional
	TLSFirst bool `json:"tlsFirst,omitempty"`
}

// SecretRef names a Secret in the Account's namespace.
type SecretRef struct {
	// +optional
	Name string `json:"name,omitempty"`
}

// AccountCreds are credentials from a Secret (file is its key) or, without secret, a
// file on NACK's own disk.
type AccountCreds struct {
	// +optional
	Secret *SecretRef `json:"secret,omitempty"`
	// +optional
	File string `json:"file,omitempty"`
}

// AccountNKey is an NKey seed from a Secret (seed is its key).
type AccountNKey struct {
	// +optional
	Secret *SecretRef `json:"secret,omitempty"`
	// +optional
	Seed string `json:"seed,omitempty"`
}

// AccountTLS are client certificates from a Secret, or files on NACK's disk.
type AccountTLS struct {
	// +optional
	Secret *SecretRef `json:"secret,omitempty"`
	// +optional
	CA string `json:"ca,omitempty"`
	// +optional
	Cert string `json:"cert,omitempty"`
	// +optional
	Key string `json:"key,omitempty"`
}

// AccountToken is a token from a Secret.
type AccountToken struct {
	// +optional
	Secret *SecretRef `json:"secret,omitempty"`
	// +optional
	Token string `json:"token,omitempty"`
}

// AccountUser is a user and password from a Secret.
type AccountUser struct {
	// +optional
	Secret *SecretRef `json:"secret,omitempty"`
	// +optional
	User string `json:"user,omitempty"`
	// +optional
	Password string `json:"password,omitempty"`
}

// Account is NACK's connection configuration for the Streams that name it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
type Account struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              AccountSpec  `json:"spec"`
	Status            StreamStatus `json:"status,omitempty"`
}

// AccountList is a list of Account.
//
// +kubebuilder:object:root=true
type AccountList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Account `json:"items"`
}
