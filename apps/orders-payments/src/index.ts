export { ordersWithPayments, runOrdersPayments, type Order, type Payment, type OrderPayment, type OrdersPaymentsOptions } from './orders-payments.js';
