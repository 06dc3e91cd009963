{{/*
The pod template of the Deployment (cluster.mode none) and of the StatefulSet (static, zookeeper),
indented for `spec.template` (include it right after `  template:`). In the cluster modes the pod
also gets POD_NAME, and with persistence its state volume comes from the StatefulSet's
volumeClaimTemplates instead of a volume.
*/}}
{{- define "hudi-keeper.podTemplate" }}
{{- $clustered := include "hudi-keeper.clustered" . }}
    metadata:
      labels:
        {{- include "hudi-keeper.labels" . | nindent 8 }}
        {{- with .Values.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        # A changed configuration restarts the pod (kustomize does it with the ConfigMap's hash).
        checksum/config: {{ include "hudi-keeper.config" . | sha256sum }}
        {{- with .Values.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ include "hudi-keeper.serviceAccountName" . }}
      automountServiceAccountToken: {{ .Values.automountServiceAccountToken }}
      {{- with .Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      # A rollback in flight reaches its next resumable point within server.shutdown_grace;
      # the daemon exits within that + 20 s (dropped work, releasing its locks, the HTTP server).
      terminationGracePeriodSeconds: {{ .Values.terminationGracePeriodSeconds }}
      {{- with .Values.podSecurityContext }}
      securityContext:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: hudi-keeper
          image: {{ include "hudi-keeper.image" . | quote }}
          imagePullPolicy: {{ .Values.image.pullPolicy }}
          args:
            {{- toYaml (concat (list "--config" "/etc/hudi-keeper/hudi-keeper.toml" "--log-format" .Values.logFormat) .Values.extraArgs) | nindent 12 }}
          env:
            {{- if $clustered }}
            {{- if eq (toString .Values.cluster.mode) "static" }}
            # This replica's index is the trailing -N of its pod name (hudi-keeper-2).
            {{- else }}
            # This replica's name in the cluster: its pod's (hudi-keeper-2).
            {{- end }}
            - name: POD_NAME
              valueFrom:
                fieldRef:
                  fieldPath: metadata.name
            {{- end }}
            - name: HUDI_KEEPER_SERVER__AUTH_TOKEN
              valueFrom:
                secretKeyRef:
                  name: {{ include "hudi-keeper.secretName" . }}
                  key: {{ .Values.auth.secretKey }}
                  optional: {{ not (or .Values.auth.token .Values.auth.existingSecret) }}
            - name: RUST_LOG
              value: {{ .Values.logLevel | quote }}
            {{- with .Values.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          {{- with .Values.extraEnvFrom }}
          envFrom:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          ports:
            # The API (server.listen).
            - name: http
              containerPort: {{ .Values.containerPort }}
              protocol: TCP
            # /healthz, /readyz and /metrics only (server.probe_listen), with connection slots of
            # their own: API clients, however many, cannot starve the probes or the scrapes.
            - name: probes
              containerPort: {{ .Values.probePort }}
              protocol: TCP
          {{- with .Values.livenessProbe }}
          livenessProbe:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          {{- with .Values.readinessProbe }}
          readinessProbe:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          {{- with .Values.startupProbe }}
          startupProbe:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          {{- with .Values.resources }}
          resources:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          {{- with .Values.securityContext }}
          securityContext:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          volumeMounts:
            - name: config
              mountPath: /etc/hudi-keeper
              readOnly: true
            - name: state
              mountPath: /var/lib/hudi-keeper
            {{- with .Values.extraVolumeMounts }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
      volumes:
        - name: config
          configMap:
            name: {{ include "hudi-keeper.fullname" . }}-config
        {{- if not $clustered }}
        # Tables registered through the API live here, and the rollbacks and restores the daemon
        # started; one daemon per state folder (Recreate, not RollingUpdate).
        - name: state
          {{- if .Values.persistence.enabled }}
          persistentVolumeClaim:
            claimName: {{ default (printf "%s-state" (include "hudi-keeper.fullname" .)) .Values.persistence.existingClaim }}
          {{- else }}
          emptyDir: {}
          {{- end }}
        {{- else if not .Values.persistence.enabled }}
        # Each pod's own state folder (one daemon per state folder): the rollbacks and restores it
        # started. An emptyDir outlives a killed container, not the pod; persistence.enabled gives
        # each replica a PersistentVolumeClaim of its own (the StatefulSet's volumeClaimTemplates).
        - name: state
          emptyDir: {}
        {{- end }}
        {{- with .Values.extraVolumes }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with .Values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end }}
