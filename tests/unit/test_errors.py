from keystoneauth1 import exceptions as ks_exc

from osc_mdev.client import errors


def test_connection_refused_is_short():
    exc = ks_exc.ConnectFailure(
        "Unable to establish connection to http://127.0.0.1:9/"
        "resource_providers: HTTPConnectionPool(host='127.0.0.1', port=9): "
        "Max retries exceeded with url: /resource_providers (Caused by "
        "NewConnectionError(\"HTTPConnection(host='127.0.0.1', port=9): "
        "Failed to establish a new connection: [Errno 111] Connection "
        "refused\"))")
    assert errors.connection_problem(exc) == (
        'http://127.0.0.1:9/resource_providers: connection refused')


def test_unknown_reason_keeps_the_first_line():
    exc = ks_exc.ConnectFailure('something odd\nand more')
    assert errors.connection_problem(exc) == 'something odd'
    assert errors.first_line(ValueError()) == 'ValueError'
