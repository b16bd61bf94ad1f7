/**
 * The version of the service and its commands, as `--version` prints it and
 * `discovery_build_info` labels it.
 *
 * @since 0.1.0
 */

/**
 * The version this build runs (the package's).
 *
 * @category models
 * @since 0.1.0
 */
export const serviceVersion = "0.1.0"
