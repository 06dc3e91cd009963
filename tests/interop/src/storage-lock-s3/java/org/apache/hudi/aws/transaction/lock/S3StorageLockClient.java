package org.apache.hudi.aws.transaction.lock;

import org.apache.hudi.client.transaction.lock.StorageLockClient;
import org.apache.hudi.client.transaction.lock.models.LockGetResult;
import org.apache.hudi.client.transaction.lock.models.LockUpsertResult;
import org.apache.hudi.client.transaction.lock.models.StorageLockData;
import org.apache.hudi.client.transaction.lock.models.StorageLockFile;
import org.apache.hudi.common.util.Option;
import org.apache.hudi.common.util.collection.Pair;

import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.core.ResponseBytes;
import software.amazon.awssdk.core.exception.SdkException;
import software.amazon.awssdk.core.checksums.RequestChecksumCalculation;
import software.amazon.awssdk.core.checksums.ResponseChecksumValidation;
import software.amazon.awssdk.core.sync.RequestBody;
import software.amazon.awssdk.http.urlconnection.UrlConnectionHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.s3.S3Client;
import software.amazon.awssdk.services.s3.S3ClientBuilder;
import software.amazon.awssdk.services.s3.model.GetObjectRequest;
import software.amazon.awssdk.services.s3.model.GetObjectResponse;
import software.amazon.awssdk.services.s3.model.PutObjectRequest;
import software.amazon.awssdk.services.s3.model.PutObjectResponse;
import software.amazon.awssdk.services.s3.model.S3Exception;

import java.io.ByteArrayInputStream;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Properties;

/**
 * The harness's own S3 client for Hudi 1.1.1's {@code StorageBasedLockProvider}, written for hudi-keeper's
 * interop tests from the contract of {@link StorageLockClient} (hudi-client-common 1.1.1). It is not Hudi's
 * class: Hudi's lives in hudi-aws 1.x, which the reachable Maven mirror does not serve. It carries the class
 * name the provider loads for {@code s3://} and {@code s3a://} base paths ({@code StorageSchemes} of
 * hudi-io 1.1.1), so that Hudi's own lease logic (acquire, renew, expiry, its 500 ms drift allowance) runs
 * unchanged on top of it.
 *
 * <p>What the contract asks, and how it is met with S3 conditional writes:
 * <ul>
 *   <li>{@code tryUpsertLockFile(data, none)}: create the lock file only if there is none
 *       ({@code If-None-Match: *}); {@code tryUpsertLockFile(data, previous)}: replace it only if it is still
 *       the version {@code previous} was read or written as ({@code If-Match: <ETag>}). On success the new
 *       file's version is the ETag the store returned.</li>
 *   <li>{@code readCurrentLockFile()}: the lock file and its ETag ({@code SUCCESS}), {@code NOT_EXISTS} on
 *       HTTP 404. Content that is not a lock file is an exception (Hudi's parser's), not a transient
 *       state.</li>
 *   <li>{@code readObject} / {@code writeObject}: small whole-object reads and unconditional writes (Hudi uses
 *       them for its optional lock audit).</li>
 * </ul>
 *
 * <p>Failures are told apart as hudi-aws's own {@code S3StorageLockClient} tells them apart (read from its
 * source, not copied: the same in the apache/hudi versions just before and after 1.1.1), so that the
 * provider's lease logic meets the outcomes it meets in production:
 * <ul>
 *   <li>a write: HTTP 412 (the precondition failed) is {@code ACQUIRED_BY_OTHERS}; every other HTTP error,
 *       409 (S3's "conditional request conflict" between concurrent conditional writes: retriable, the
 *       lease may or may not have changed) included, is {@code UNKNOWN_ERROR}, which the provider treats as
 *       "state unknown" (no acquisition; a renewal retried at the next heartbeat). An error without an HTTP
 *       answer (the network, the SDK) is thrown when creating the file (no previous version) and
 *       {@code UNKNOWN_ERROR} when replacing it.</li>
 *   <li>a read: HTTP 409, 429 and 5xx are {@code UNKNOWN_ERROR}; any other HTTP error (403, 400, ...) and
 *       an error without an HTTP answer are thrown.</li>
 * </ul>
 *
 * <p>Where the store is, harness-only properties (in the lock configuration Hudi passes through):
 * {@code interop.s3.endpoint} (path-style, e.g. the moto server on loopback), {@code interop.s3.region}
 * (default us-east-1), {@code interop.s3.access.key} / {@code interop.s3.secret.key} (default: the SDK's
 * default credential chain). Each request is bounded to a fifth of the lease validity, so a hung store
 * cannot hold a renewal past the lease.
 */
public class S3StorageLockClient implements StorageLockClient {
  static final String ENDPOINT = "interop.s3.endpoint";
  static final String REGION = "interop.s3.region";
  static final String ACCESS_KEY = "interop.s3.access.key";
  static final String SECRET_KEY = "interop.s3.secret.key";
  private static final String VALIDITY_KEY = "hoodie.write.lock.storage.validity.timeout.secs";
  private static final int HTTP_NOT_FOUND = 404;
  private static final int HTTP_CONFLICT = 409;
  private static final int HTTP_PRECONDITION_FAILED = 412;
  private static final int HTTP_TOO_MANY_REQUESTS = 429;
  private static final int HTTP_SERVER_ERROR = 500;

  private final String ownerId;
  private final String bucket;
  private final String key;
  private final S3Client s3;

  /** The constructor {@code StorageBasedLockProvider} calls by reflection. */
  public S3StorageLockClient(String ownerId, String lockFileUri, Properties props) {
    Pair<String, String> bucketAndKey = StorageLockClient.parseBucketAndPath(lockFileUri);
    this.ownerId = ownerId;
    this.bucket = bucketAndKey.getLeft();
    this.key = bucketAndKey.getRight();
    this.s3 = client(props);
  }

  private static S3Client client(Properties props) {
    long validitySecs = Long.parseLong(String.valueOf(props.getOrDefault(VALIDITY_KEY, "300")));
    S3ClientBuilder b = S3Client.builder()
        .httpClientBuilder(UrlConnectionHttpClient.builder())
        .region(Region.of(props.getProperty(REGION, "us-east-1")))
        // only the checksums S3 requires: S3-compatible servers differ in the optional ones
        .requestChecksumCalculation(RequestChecksumCalculation.WHEN_REQUIRED)
        .responseChecksumValidation(ResponseChecksumValidation.WHEN_REQUIRED)
        .overrideConfiguration(o -> o.apiCallTimeout(Duration.ofMillis(Math.max(1000L, validitySecs * 1000L / 5))));
    String endpoint = props.getProperty(ENDPOINT);
    if (endpoint != null && !endpoint.isEmpty()) {
      b = b.endpointOverride(URI.create(endpoint)).forcePathStyle(true);
    }
    String access = props.getProperty(ACCESS_KEY);
    if (access != null) {
      b = b.credentialsProvider(StaticCredentialsProvider.create(
          AwsBasicCredentials.create(access, props.getProperty(SECRET_KEY, ""))));
    } else {
      b = b.credentialsProvider(DefaultCredentialsProvider.builder().build());
    }
    return b.build();
  }

  @Override
  public Pair<LockUpsertResult, Option<StorageLockFile>> tryUpsertLockFile(
      StorageLockData newLockData, Option<StorageLockFile> previousLockFile) {
    PutObjectRequest.Builder put = PutObjectRequest.builder().bucket(bucket).key(key)
        .contentType("application/json");
    if (previousLockFile.isPresent()) {
      put = put.ifMatch(previousLockFile.get().getVersionId());
    } else {
      put = put.ifNoneMatch("*");
    }
    String where = "conditional write of s3://" + bucket + "/" + key;
    try {
      PutObjectResponse r = s3.putObject(put.build(), RequestBody.fromBytes(StorageLockFile.toByteArray(newLockData)));
      return Pair.of(LockUpsertResult.SUCCESS, Option.of(new StorageLockFile(newLockData, r.eTag())));
    } catch (S3Exception e) {
      int status = e.statusCode();
      if (status == HTTP_PRECONDITION_FAILED) {
        return Pair.of(LockUpsertResult.ACQUIRED_BY_OTHERS, Option.empty());
      }
      log(where + " failed (" + (status == HTTP_CONFLICT ? "conflicting conditional request, retriable" : "HTTP " + status)
          + "): " + e.getMessage());
      return Pair.of(LockUpsertResult.UNKNOWN_ERROR, Option.empty());
    } catch (SdkException e) {
      log(where + " failed without an answer: " + e);
      if (previousLockFile.isEmpty()) {
        throw e;
      }
      return Pair.of(LockUpsertResult.UNKNOWN_ERROR, Option.empty());
    }
  }

  @Override
  public Pair<LockGetResult, Option<StorageLockFile>> readCurrentLockFile() {
    ResponseBytes<GetObjectResponse> bytes;
    try {
      bytes = s3.getObjectAsBytes(GetObjectRequest.builder().bucket(bucket).key(key).build());
    } catch (S3Exception e) {
      int status = e.statusCode();
      if (status == HTTP_NOT_FOUND) {
        return Pair.of(LockGetResult.NOT_EXISTS, Option.empty());
      }
      log("reading s3://" + bucket + "/" + key + " failed: HTTP " + status + " " + e.getMessage());
      if (status == HTTP_CONFLICT || status == HTTP_TOO_MANY_REQUESTS || status >= HTTP_SERVER_ERROR) {
        return Pair.of(LockGetResult.UNKNOWN_ERROR, Option.empty());
      }
      throw e;
    }
    String etag = bytes.response().eTag();
    return Pair.of(LockGetResult.SUCCESS,
        Option.of(StorageLockFile.createFromStream(new ByteArrayInputStream(bytes.asByteArray()), etag)));
  }

  @Override
  public Option<String> readObject(String filePath, boolean checkExistsFirst) {
    Pair<String, String> bk = StorageLockClient.parseBucketAndPath(filePath);
    try {
      // A GET answers "absent" as cheaply as a HEAD would: checkExistsFirst needs no extra request.
      return Option.of(s3.getObjectAsBytes(GetObjectRequest.builder().bucket(bk.getLeft()).key(bk.getRight()).build())
          .asString(StandardCharsets.UTF_8));
    } catch (S3Exception e) {
      if (e.statusCode() != 404) {
        log("reading " + filePath + " failed: HTTP " + e.statusCode());
      }
      return Option.empty();
    } catch (RuntimeException e) {
      log("reading " + filePath + " failed: " + e);
      return Option.empty();
    }
  }

  @Override
  public boolean writeObject(String filePath, String content) {
    Pair<String, String> bk = StorageLockClient.parseBucketAndPath(filePath);
    try {
      s3.putObject(PutObjectRequest.builder().bucket(bk.getLeft()).key(bk.getRight()).build(),
          RequestBody.fromString(content, StandardCharsets.UTF_8));
      return true;
    } catch (RuntimeException e) {
      log("writing " + filePath + " failed: " + e);
      return false;
    }
  }

  @Override
  public void close() {
    s3.close();
  }

  private void log(String msg) {
    System.err.println("[S3StorageLockClient " + ownerId + "] " + msg);
  }
}
